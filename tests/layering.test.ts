import path from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { mayImportTable } from '../scripts/eslint-layering.js';

/**
 * The may-import table (STYLE.md) is enforced by eslint.config.js. Each case lints a small
 * in-memory file placed at a real path in the repo and checks the rule that must fire.
 */
const root = path.resolve(import.meta.dirname, '..');
let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: root });
});

async function lint(relativePath: string, code: string): Promise<Array<{ ruleId: string; message: string }>> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, relativePath) });
  if (result === undefined) throw new Error('ESLint returned no result');
  return result.messages.map((message) => ({
    ruleId: message.ruleId ?? `fatal: ${message.message}`,
    message: message.message,
  }));
}

async function ruleIds(relativePath: string, code: string): Promise<string[]> {
  return (await lint(relativePath, code)).map((message) => message.ruleId);
}

const offending: ReadonlyArray<{ when: string; file: string; code: string; rule: string }> = [
  // broker/contract imports nothing of ours, no node, no electron, nothing impure
  {
    when: 'contract imports core',
    file: 'broker/contract/x.ts',
    code: "export { applyEvent } from '../core/index.js';",
    rule: 'postern/may-import',
  },
  {
    when: 'contract imports the journal',
    file: 'broker/contract/x.ts',
    code: "import { x } from '../journal/y.js';\nexport const y = x;",
    rule: 'postern/may-import',
  },
  {
    when: 'contract imports node:fs',
    file: 'broker/contract/x.ts',
    code: "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'contract imports a bare builtin',
    file: 'broker/contract/x.ts',
    code: "import path from 'path';\nexport const p = path;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'contract imports electron',
    file: 'broker/contract/x.ts',
    code: "import { app } from 'electron';\nexport const a = app;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'contract reads the clock',
    file: 'broker/contract/x.ts',
    code: 'export const now = (): number => Date.now();',
    rule: 'no-restricted-globals',
  },
  {
    when: 'contract uses crypto',
    file: 'broker/contract/x.ts',
    code: 'export const id = (): string => crypto.randomUUID();',
    rule: 'no-restricted-globals',
  },
  {
    when: 'contract reads process.env',
    file: 'broker/contract/x.ts',
    code: "export const e = process.env['X'];",
    rule: 'no-restricted-globals',
  },
  {
    when: 'contract touches the DOM',
    file: 'broker/contract/x.ts',
    code: 'export const t = (): string => document.title;',
    rule: 'no-restricted-globals',
  },
  {
    when: 'contract fetches',
    file: 'broker/contract/x.ts',
    code: "export const f = (): Promise<unknown> => fetch('http://x');",
    rule: 'no-restricted-globals',
  },
  // broker/core imports only contract, and is pure
  {
    when: 'core imports the journal',
    file: 'broker/core/x.ts',
    code: "import { open } from '../journal/journal.js';\nexport const o = open;",
    rule: 'postern/may-import',
  },
  {
    when: 'core imports ports',
    file: 'broker/core/x.ts',
    code: "import { systemClock } from '../ports/index.js';\nexport const c = systemClock;",
    rule: 'postern/may-import',
  },
  {
    when: 'core imports node:fs/promises',
    file: 'broker/core/x.ts',
    code: "import { readFile } from 'node:fs/promises';\nexport const r = readFile;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'core imports a bare fs',
    file: 'broker/core/sub/x.ts',
    code: "import fs from 'fs';\nexport const f = fs;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'core uses Math.random',
    file: 'broker/core/x.ts',
    code: 'export const r = (): number => Math.random();',
    rule: 'no-restricted-properties',
  },
  {
    when: 'core sets a timer',
    file: 'broker/core/x.ts',
    code: 'export const t = (f: () => void): unknown => setTimeout(f, 1);',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core sets an interval',
    file: 'broker/core/x.ts',
    code: 'export const t = (f: () => void): unknown => setInterval(f, 1);',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core constructs a Date',
    file: 'broker/core/x.ts',
    code: 'export const d = (): unknown => new Date();',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core reads performance',
    file: 'broker/core/x.ts',
    code: 'export const p = (): number => performance.now();',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core reaches through globalThis',
    file: 'broker/core/x.ts',
    code: 'export const g = (): unknown => globalThis;',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core touches window',
    file: 'broker/core/x.ts',
    code: 'export const w = (): unknown => window;',
    rule: 'no-restricted-globals',
  },
  {
    when: 'core imports dynamically',
    file: 'broker/core/x.ts',
    code: "export const m = (): Promise<unknown> => import('./y.js');",
    rule: 'no-restricted-syntax',
  },
  // renderer: import type from broker/contract only
  {
    when: 'renderer imports a contract value',
    file: 'renderer/src/x.tsx',
    code: "import { brokerStatusSchema } from '../../broker/contract/index.js';\nexport const s = brokerStatusSchema;",
    rule: 'postern/may-import',
  },
  {
    when: 'renderer imports inline-typed names',
    file: 'renderer/src/x.tsx',
    code: "import { type BrokerStatus } from '../../broker/contract/index.js';\nexport type S = BrokerStatus;",
    rule: 'postern/may-import',
  },
  {
    when: 'renderer imports core',
    file: 'renderer/src/views/x.tsx',
    code: "import { applyEvent } from '../../../broker/core/index.js';\nexport const a = applyEvent;",
    rule: 'postern/may-import',
  },
  {
    when: 'renderer imports the host',
    file: 'renderer/src/x.ts',
    code: "import type { OperatorHandlers } from '../../broker/host/index.js';\nexport type H = OperatorHandlers;",
    rule: 'postern/may-import',
  },
  {
    when: 'renderer imports the Electron shell',
    file: 'renderer/src/x.ts',
    code: "import { apiChannel } from '../../app/shared/api-channel.js';\nexport const c = apiChannel;",
    rule: 'postern/may-import',
  },
  {
    when: 'renderer imports node:fs',
    file: 'renderer/src/x.tsx',
    code: "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'renderer imports electron',
    file: 'renderer/src/x.tsx',
    code: "import { ipcRenderer } from 'electron';\nexport const i = ipcRenderer;",
    rule: 'no-restricted-imports',
  },
  // app: the broker's public entry and contract only
  {
    when: 'app imports the journal',
    file: 'app/main/x.ts',
    code: "import { open } from '../../broker/journal/journal.js';\nexport const o = open;",
    rule: 'postern/may-import',
  },
  {
    when: 'app imports a host internal',
    file: 'app/main/x.ts',
    code: "import { startOperatorHttpHost } from '../../broker/host/http-host.js';\nexport const s = startOperatorHttpHost;",
    rule: 'postern/may-import',
  },
  {
    when: 'app imports the renderer',
    file: 'app/main/x.ts',
    code: "import { App } from '../../renderer/src/app.js';\nexport const a = App;",
    rule: 'postern/may-import',
  },
  // the rest of broker/
  {
    when: 'an I/O folder imports electron',
    file: 'broker/journal/x.ts',
    code: "import { app } from 'electron';\nexport const a = app;",
    rule: 'no-restricted-imports',
  },
  {
    when: 'an I/O folder imports another I/O folder',
    file: 'broker/journal/x.ts',
    code: "import { x } from '../vault/vault.js';\nexport const y = x;",
    rule: 'postern/may-import',
  },
  {
    when: 'production broker code imports broker/testing',
    file: 'broker/host/x.ts',
    code: "import { FakeClock } from '../testing/fake-clock.js';\nexport const f = FakeClock;",
    rule: 'postern/may-import',
  },
  {
    when: 'broker code imports the renderer',
    file: 'broker/cli/x.ts',
    code: "import { App } from '../../renderer/src/app.js';\nexport const a = App;",
    rule: 'postern/may-import',
  },
];

const clean: ReadonlyArray<{ when: string; file: string; code: string }> = [
  {
    when: 'contract imports zod and its own files',
    file: 'broker/contract/x.ts',
    code: "import { z } from 'zod';\nimport { ErrorCode } from './error-codes.js';\nexport const s = z.string();\nexport const c = ErrorCode;",
  },
  {
    when: 'contract subfolder imports its parent folder',
    file: 'broker/contract/sub/x.ts',
    code: "import { ErrorCode } from '../error-codes.js';\nexport const c = ErrorCode;",
  },
  {
    when: 'core imports contract',
    file: 'broker/core/x.ts',
    code: "import { CodedError } from '../contract/index.js';\nexport const e = (): Error => new CodedError('INTERNAL', 'x');",
  },
  {
    when: 'a core test uses node and the clock',
    file: 'broker/core/x.test.ts',
    code: "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;\nexport const now = Date.now();",
  },
  {
    when: 'renderer imports contract types',
    file: 'renderer/src/x.tsx',
    code: "import type { BrokerStatus } from '../../broker/contract/index.js';\nexport type S = BrokerStatus;",
  },
  {
    when: 'app imports the public entry and contract',
    file: 'app/main/x.ts',
    code: "import { createBrokerRuntime } from '../../broker/host/index.js';\nimport { brokerApiMethods } from '../../broker/contract/index.js';\nimport { app } from 'electron';\nexport const all = [createBrokerRuntime, brokerApiMethods, app];",
  },
  {
    when: 'the journal imports core, contract and ports',
    file: 'broker/journal/x.ts',
    code: "import { applyEvent } from '../core/index.js';\nimport { CodedError } from '../contract/index.js';\nimport { systemClock } from '../ports/index.js';\nimport { readFileSync } from 'node:fs';\nexport const all = [applyEvent, CodedError, systemClock, readFileSync];",
  },
  {
    when: 'the CLI composes anything in broker',
    file: 'broker/cli/x.ts',
    code: "import { open } from '../journal/journal.js';\nimport { startOperatorHttpHost } from '../host/http-host.js';\nexport const all = [open, startOperatorHttpHost];",
  },
];

// ---- Cases generated from the may-import table (scripts/eslint-layering.js), so a new row is tested the day it lands ----

/** A file of `folder` to lint (the renderer's code lives in src/, the root row's files at the root). */
function fileIn(folder: string, name = 'x.ts'): string {
  if (folder === '.') return name;
  return folder === 'renderer' ? `renderer/src/${name}` : `${folder}/${name}`;
}

/** One import of each target folder's index, written as `file` would (type-only for the renderer). */
function importsOf(file: string, targets: readonly string[], typeOnly: boolean): string {
  if (targets.length === 0) return 'export const nothing = 1;\n';
  const lines = targets.map((target, i) => {
    let specifier = path.posix.relative(path.posix.dirname(file), fileIn(target, 'index.js'));
    if (!specifier.startsWith('.')) specifier = `./${specifier}`;
    return typeOnly ? `import type { T${i} } from '${specifier}';` : `import { v${i} } from '${specifier}';`;
  });
  const uses = targets.map((_, i) => (typeOnly ? `T${i}` : `v${i}`));
  return `${lines.join('\n')}\n${typeOnly ? `export type All = [${uses.join(', ')}];` : `export const all = [${uses.join(', ')}];`}\n`;
}

const folders = mayImportTable.map((row) => row.folder);
const brokerFolders = folders.filter((folder) => folder.startsWith('broker/'));

/** Per row: a file importing the first folder (in table order) outside its allow-list. */
const firingPerRow = mayImportTable.map((row) => {
  const forbidden = folders.find((folder) => folder !== row.folder && !row.mayImport.includes(folder));
  if (forbidden === undefined) throw new Error(`${row.folder} may import every folder: no row may`);
  const file = fileIn(row.folder);
  return { folder: row.folder, forbidden, file, code: importsOf(file, [forbidden], row.folder === 'renderer') };
});

/** Per row: a file importing every folder of its allow-list. */
const quietPerRow = mayImportTable.map((row) => {
  const file = fileIn(row.folder);
  return {
    folder: row.folder,
    count: String(row.mayImport.length),
    file,
    code: importsOf(file, row.mayImport, row.folder === 'renderer'),
  };
});

/** Per row whose tests may import any broker folder: a test importing all of them, broker/testing included. */
const quietTestsPerRow = mayImportTable
  .filter((row) => row.testsAnyBroker === true)
  .map((row) => {
    const file = fileIn(row.folder, 'x.test.ts');
    return {
      folder: row.folder,
      file,
      code: importsOf(
        file,
        brokerFolders.filter((folder) => folder !== row.folder),
        false,
      ),
    };
  });

describe('the may-import table, row by row', () => {
  it.each(firingPerRow)('flags $folder importing $forbidden', async ({ file, code }) => {
    expect(await ruleIds(file, code)).toContain('postern/may-import');
  });

  it.each(quietPerRow)('stays quiet when $folder imports its $count allowed folders', async ({ file, code }) => {
    expect(await ruleIds(file, code)).toEqual([]);
  });

  it.each(quietTestsPerRow)('stays quiet when a test in $folder imports any broker folder', async ({ file, code }) => {
    expect(await ruleIds(file, code)).toEqual([]);
  });

  it.each([
    ['a folder under broker/ with no row', 'broker/nowhere/x.ts'],
    ['a file directly in broker/', 'broker/x.ts'],
    ['a file directly in broker/channels/', 'broker/channels/x.ts'],
    ['a top-level folder with no row', 'nowhere/x.ts'],
  ])('fails closed on %s (%s)', async (_when, file) => {
    const messages = await lint(file, importsOf(file, ['broker/contract'], false));
    expect(messages).toEqual([
      { ruleId: 'postern/may-import', message: expect.stringContaining('add it to the may-import table') },
    ]);
  });

  it('fails closed on an import into a folder with no row', async () => {
    const messages = await lint('broker/host/x.ts', "import { x } from '../nowhere/y.js';\nexport const y = x;\n");
    expect(messages).toEqual([
      { ruleId: 'postern/may-import', message: expect.stringContaining('add it to the may-import table') },
    ]);
  });

  it.each([
    ['broker/queue', 'broker/host'],
    ['broker/queue', 'broker/cli'],
    ['broker/queue', 'broker/agent'],
    ['broker/queue', 'broker/testing'],
    ['broker/queue', 'broker/actions'],
    ['broker/actions', 'broker/host'],
    ['broker/host', 'broker/cli'],
    ['broker/journal', 'broker/queue'],
    ['broker/sdk', 'broker/core'],
    ['broker/channels/http', 'broker/channels/ssh'],
    ['broker/testing', 'broker/cli'],
  ])('flags %s importing %s (it runs back up, or sideways)', async (from, to) => {
    const file = fileIn(from);
    expect(await ruleIds(file, importsOf(file, [to], false))).toContain('postern/may-import');
  });

  it('holds contract and core tests to their rows', async () => {
    expect(
      await ruleIds('broker/core/x.test.ts', importsOf('broker/core/x.test.ts', ['broker/journal'], false)),
    ).toContain('postern/may-import');
    expect(
      await ruleIds('broker/contract/x.test.ts', importsOf('broker/contract/x.test.ts', ['broker/core'], false)),
    ).toContain('postern/may-import');
  });
});

describe('layering lint (eslint.config.js)', () => {
  it.each(offending)('flags it when $when ($file)', async ({ file, code, rule }) => {
    expect(await ruleIds(file, code)).toContain(rule);
  });

  it.each(clean)('stays quiet when $when ($file)', async ({ file, code }) => {
    expect(await ruleIds(file, code)).toEqual([]);
  });
});
