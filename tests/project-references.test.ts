import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The second layering guard: per-folder composite tsconfig projects. A file that imports across a
 * boundary pulls in a file that is neither in its project nor in a referenced one, and `tsc -b`
 * fails with TS6307. Each case copies the REAL tsconfig files into a scratch tree, adds small
 * source stubs plus one offending import, and runs the real compiler.
 */
const repoRoot = path.resolve(import.meta.dirname, '..');
const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
const configs = [
  'tsconfig.base.json',
  'broker/contract/tsconfig.json',
  'broker/core/tsconfig.json',
  'broker/tsconfig.io.json',
  'broker/queue/tsconfig.json',
  'broker/actions/tsconfig.json',
  'broker/tsconfig.json',
  'renderer/tsconfig.json',
  'app/tsconfig.json',
];
const stubs: Record<string, string> = {
  'broker/contract/index.ts': 'export type Status = { ok: boolean };\n',
  'broker/core/index.ts':
    "import type { Status } from '../contract/index.js';\nexport const isOk = (status: Status): boolean => status.ok;\n",
  'broker/journal/journal.ts':
    "import { isOk } from '../core/index.js';\nexport const journalOk = isOk({ ok: true });\n",
  'broker/queue/approval-queue.ts':
    "import { journalOk } from '../journal/journal.js';\nexport const queueOk = journalOk;\n",
  'broker/actions/execute-http-action.ts':
    "import { queueOk } from '../queue/approval-queue.js';\nexport const actionOk = queueOk;\n",
  'broker/host/index.ts':
    "import { actionOk } from '../actions/execute-http-action.js';\nexport const host = actionOk ? 'host' : 'none';\n",
  'renderer/src/main.ts':
    "import type { Status } from '../../broker/contract/index.js';\nexport type Shown = Status;\n",
  'app/main/main.ts': "import { host } from '../../broker/host/index.js';\nexport const shell = host;\n",
};

const scratchRoot = mkdtempSync(path.join(os.tmpdir(), 'postern-tsrefs-'));
afterAll(() => rmSync(scratchRoot, { recursive: true, force: true }));

function scratchTree(name: string, extra: Record<string, string>): string {
  const root = path.join(scratchRoot, name);
  for (const config of configs) {
    mkdirSync(path.dirname(path.join(root, config)), { recursive: true });
    copyFileSync(path.join(repoRoot, config), path.join(root, config));
  }
  for (const [file, text] of Object.entries({ ...stubs, ...extra })) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  writeFileSync(path.join(root, 'package.json'), '{ "type": "module" }\n');
  symlinkSync(path.join(repoRoot, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  return root;
}

async function build(root: string, projects: readonly string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [tsc, '-b', ...projects.map((p) => path.join(root, p))],
      { cwd: root },
    );
    return { code: 0, output: stdout };
  } catch (error) {
    const failure = error as { code?: number; stdout?: string };
    return { code: failure.code ?? 1, output: failure.stdout ?? String(error) };
  }
}

/** Declaration files written among the sources (not under .tsbuild): what a failed build must never leave. */
function strayDeclarations(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).filter(
    (file) => file.endsWith('.d.ts') && !file.startsWith('node_modules') && !file.startsWith('.tsbuild'),
  );
}

/** Nine tsc builds run at once on a 2-core machine: under other load one can take well past the default 30 s. */
const buildTimeoutMs = 150_000;

describe.concurrent('tsc -b project references', () => {
  it(
    'builds the stub tree when every import respects the table',
    async () => {
      const root = scratchTree('clean', {});
      const result = await build(root, ['renderer', 'app', 'broker']);
      expect(result).toEqual({ code: 0, output: '' });
    },
    buildTimeoutMs,
  );

  it.each<[string, string, string, string]>([
    [
      'renderer imports broker/core',
      'renderer/src/bad.ts',
      "import { isOk } from '../../broker/core/index.js';\nexport const bad = isOk;\n",
      'renderer',
    ],
    [
      'broker/contract imports broker/core',
      'broker/contract/bad.ts',
      "import { isOk } from '../core/index.js';\nexport const bad = isOk;\n",
      'broker/contract',
    ],
    [
      'broker/core imports broker/journal',
      'broker/core/bad.ts',
      "import { journalOk } from '../journal/journal.js';\nexport const bad = journalOk;\n",
      'broker/core',
    ],
    [
      'app imports the renderer',
      'app/main/bad.ts',
      "import type { Shown } from '../../renderer/src/main.js';\nexport type Bad = Shown;\n",
      'app',
    ],
    [
      'broker/queue imports broker/host',
      'broker/queue/bad.ts',
      "import { host } from '../host/index.js';\nexport const bad = host;\n",
      'broker/queue',
    ],
    [
      'broker/queue imports broker/actions',
      'broker/queue/bad.ts',
      "import { actionOk } from '../actions/execute-http-action.js';\nexport const bad = actionOk;\n",
      'broker/queue',
    ],
    [
      'broker/actions imports broker/host',
      'broker/actions/bad.ts',
      "import { host } from '../host/index.js';\nexport const bad = host;\n",
      'broker/actions',
    ],
    [
      'an I/O folder imports broker/queue',
      'broker/journal/bad.ts',
      "import { queueOk } from '../queue/approval-queue.js';\nexport const bad = queueOk;\n",
      'broker/tsconfig.io.json',
    ],
  ])(
    'fails with TS6307 when %s',
    async (when, file, text, project) => {
      const root = scratchTree(when.replaceAll(/\W+/g, '-'), { [file]: text });
      const result = await build(root, [project]);
      expect(result.code).not.toBe(0);
      expect(result.output).toContain('TS6307');
      expect(result.output).toContain(project.endsWith('.json') ? project : `${project}/tsconfig.json`);
      // noEmitOnError (tsconfig.base.json): without it TS 5.6+ emits despite errors, and the file
      // pulled across the boundary gets a .d.ts written beside its source.
      expect(strayDeclarations(root)).toEqual([]);
    },
    buildTimeoutMs,
  );
});
