// The may-import table as an ESLint rule. no-restricted-imports matches import strings, which cannot
// tell `../core/x.js` in broker/contract (forbidden) from `../x.js` in a subfolder of it (fine); this
// rule resolves every relative specifier against the importing file and checks the folder it lands in
// against an explicit allow-list. It fails closed: a file in a folder the table does not name, or an
// import into one, is an error until the folder gets its row (here and in ARCHITECTURE.md's code map,
// which tests/may-import-table.test.ts holds equal to this table). Node builtins and electron are
// banned with the stock no-restricted-imports rule in eslint.config.js.
import path from 'node:path';

const repoRoot = path.resolve(import.meta.dirname, '..');

/**
 * Every folder of the repo that holds code (or may one day), and the exact set of other folders its
 * files may import: what they import today, nothing that runs back up. A folder's subfolders belong to
 * it (broker/journal/migrations is broker/journal). `.` is the files at the repo root.
 * `testsAnyBroker`: a `*.test.ts` in this folder may also import any broker folder, broker/testing
 * included — a test is never imported, so it cannot close a cycle. contract and core are held to their
 * rows in their tests too, as are renderer and app.
 * @type {ReadonlyArray<{ folder: string, mayImport: readonly string[], testsAnyBroker?: boolean }>}
 */
export const mayImportTable = [
  { folder: 'broker/contract', mayImport: [] },
  { folder: 'broker/core', mayImport: ['broker/contract'] },
  { folder: 'broker/ports', mayImport: ['broker/contract'], testsAnyBroker: true },
  { folder: 'broker/journal', mayImport: ['broker/contract', 'broker/core', 'broker/ports'], testsAnyBroker: true },
  { folder: 'broker/vault', mayImport: ['broker/contract', 'broker/core', 'broker/ports'], testsAnyBroker: true },
  { folder: 'broker/config', mayImport: ['broker/contract', 'broker/core', 'broker/ports'], testsAnyBroker: true },
  {
    folder: 'broker/channels/http',
    mayImport: ['broker/contract', 'broker/core', 'broker/ports'],
    testsAnyBroker: true,
  },
  {
    folder: 'broker/channels/ssh',
    mayImport: ['broker/contract', 'broker/core', 'broker/ports'],
    testsAnyBroker: true,
  },
  {
    folder: 'broker/channels/mcp',
    mayImport: ['broker/channels/http', 'broker/contract', 'broker/core', 'broker/ports'],
    testsAnyBroker: true,
  },
  { folder: 'broker/agent', mayImport: ['broker/contract', 'broker/core', 'broker/ports'], testsAnyBroker: true },
  { folder: 'broker/sdk', mayImport: ['broker/contract'], testsAnyBroker: true },
  { folder: 'native/peercred', mayImport: [] },
  {
    folder: 'broker/queue',
    mayImport: ['broker/config', 'broker/contract', 'broker/core', 'broker/journal', 'broker/ports'],
    testsAnyBroker: true,
  },
  {
    folder: 'broker/actions',
    mayImport: [
      'broker/channels/http',
      'broker/channels/mcp',
      'broker/channels/ssh',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/journal',
      'broker/ports',
      'broker/queue',
    ],
    testsAnyBroker: true,
  },
  { folder: 'broker/audit', mayImport: ['broker/contract', 'broker/core', 'broker/ports'], testsAnyBroker: true },
  {
    folder: 'broker/host',
    mayImport: [
      'broker/actions',
      'broker/agent',
      'broker/audit',
      'broker/channels/http',
      'broker/channels/mcp',
      'broker/channels/ssh',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/journal',
      'broker/ports',
      'broker/queue',
      'broker/vault',
    ],
    testsAnyBroker: true,
  },
  {
    folder: 'broker/cli',
    mayImport: [
      'broker/agent',
      'broker/audit',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/host',
      'broker/journal',
      'broker/ports',
      'broker/vault',
    ],
    testsAnyBroker: true,
  },
  {
    folder: 'broker/testing',
    mayImport: [
      'broker/actions',
      'broker/channels/http',
      'broker/channels/ssh',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/journal',
      'broker/ports',
      'broker/queue',
      'broker/vault',
    ],
    testsAnyBroker: true,
  },
  { folder: 'bin', mayImport: ['broker/cli'] },
  { folder: 'renderer', mayImport: ['broker/contract'] },
  { folder: 'app', mayImport: ['broker/contract', 'broker/host'] },
  {
    folder: 'e2e',
    mayImport: [
      'broker/audit',
      'broker/cli',
      'broker/contract',
      'broker/host',
      'broker/journal',
      'broker/ports',
      'broker/testing',
      'broker/vault',
      'tests',
    ],
  },
  {
    folder: 'tests',
    mayImport: [
      'bench',
      'broker/actions',
      'broker/agent',
      'broker/cli',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/host',
      'broker/journal',
      'broker/ports',
      'broker/sdk',
      'broker/testing',
      'broker/vault',
      'scripts',
    ],
  },
  { folder: 'scripts', mayImport: ['broker/config', 'broker/contract'] },
  {
    folder: 'bench',
    mayImport: [
      'broker/actions',
      'broker/agent',
      'broker/audit',
      'broker/channels/http',
      'broker/channels/ssh',
      'broker/config',
      'broker/contract',
      'broker/core',
      'broker/host',
      'broker/journal',
      'broker/ports',
      'broker/queue',
      'broker/testing',
      'broker/vault',
      'e2e',
      'scripts',
      'tests',
    ],
  },
  { folder: 'docs', mayImport: [] },
  { folder: '.', mayImport: ['scripts'] },
];

const rows = new Map(mayImportTable.map((row) => [row.folder, row]));
const brokerFolders = new Set(mayImportTable.map((row) => row.folder).filter((folder) => folder.startsWith('broker/')));

/** app/ reaches the broker only through its public entry. */
const publicEntries = new Set(['broker/host/index.ts', 'broker/host/index.js']);
/**
 * Contract files with no runtime imports (type imports vanish), which the renderer may load at runtime: the method
 * list, how a decision's actor and who decided an action are worded (so every surface says "person:alice (cli,
 * passphrase on tty)" and "allowed by policy (approval: none)" alike),
 * the names the host's sign-in answer and the page agree on, and how a command is marked visible (so the card and
 * main's native decision dialog mark it alike), what an SSH card with no command kept says in its place (so the card,
 * the dialog and `postern approvals list` say it alike), how a wall time is written (so the page and main's dialog
 * write it alike), and an Events row's text as its reader sees it (event-row-text.ts, whose one runtime import is
 * time-words.ts: so the page writes a row as the broker's Text filter matches it), and the words beside a session's
 * status whose record the journal has not confirmed (session-record.ts: so the card, the request card and `postern
 * sessions` say it alike).
 */
const rendererRuntimeContract = new Set([
  'broker/contract/operator-methods.ts',
  'broker/contract/operator-methods.js',
  'broker/contract/operator-actor.ts',
  'broker/contract/operator-actor.js',
  'broker/contract/operator-sign-in.ts',
  'broker/contract/operator-sign-in.js',
  'broker/contract/visible-command.ts',
  'broker/contract/visible-command.js',
  'broker/contract/command-not-kept.ts',
  'broker/contract/command-not-kept.js',
  'broker/contract/time-words.ts',
  'broker/contract/time-words.js',
  'broker/contract/event-row-text.ts',
  'broker/contract/event-row-text.js',
  'broker/contract/session-record.ts',
  'broker/contract/session-record.js',
]);

/** The table folder a repo-relative file path belongs to (the longest row that contains it), or undefined. */
export function folderOf(relative) {
  const parts = relative.split('/');
  if (parts.length === 1) return rows.has('.') ? '.' : undefined;
  for (let depth = parts.length - 1; depth > 0; depth--) {
    const folder = parts.slice(0, depth).join('/');
    if (rows.has(folder)) return folder;
  }
  return undefined;
}

function unknownFolder(file) {
  return `${path.posix.dirname(file)}/ is in no row of the may-import table: add it to the may-import table (scripts/eslint-layering.js and ARCHITECTURE.md)`;
}

/** Why `from` may not import `to` (both repo-relative files), or undefined when it may. */
export function violation(from, to, typeOnly) {
  const source = folderOf(from);
  const target = folderOf(to);
  if (source === undefined) return unknownFolder(from);
  if (target === undefined) return unknownFolder(to);
  if (source === target) return undefined;
  const row = rows.get(source);
  const isTest = /\.test\.tsx?$/.test(from);
  if (source.startsWith('broker/') && !isTest && target === 'broker/testing')
    return 'production code never imports broker/testing';
  if (isTest && row.testsAnyBroker && brokerFolders.has(target)) return undefined;
  if (!row.mayImport.includes(target)) {
    const allowed = row.mayImport.length === 0 ? 'nothing of ours' : `only ${row.mayImport.join(', ')}`;
    return `${source} may import ${allowed} (may-import table)`;
  }
  if (source === 'renderer' && !typeOnly && !rendererRuntimeContract.has(to)) {
    return 'renderer/ may import broker/contract only with `import type` (no runtime code crosses into the page), except operator-methods.ts, operator-actor.ts, operator-sign-in.ts, visible-command.ts, command-not-kept.ts, time-words.ts, event-row-text.ts and session-record.ts';
  }
  if (source === 'app' && target === 'broker/host' && !publicEntries.has(to)) {
    return "app/ may import only the broker's public entry (broker/host/index.ts) and broker/contract";
  }
  return undefined;
}

/** @type {import('eslint').Rule.RuleModule} */
const mayImport = {
  meta: {
    type: 'problem',
    docs: { description: 'Enforce the may-import table (ARCHITECTURE.md code map) between Postern folders' },
    schema: [],
    messages: { forbidden: '{{reason}} (importing {{target}}).', unknownFolder: '{{reason}}.' },
  },
  create(context) {
    const from = path.relative(repoRoot, context.physicalFilename).split(path.sep).join('/');
    if (from.startsWith('..')) return {};
    if (folderOf(from) === undefined) {
      // One report for the file; its imports are not checked against a row it does not have.
      return {
        Program: (node) => context.report({ node, messageId: 'unknownFolder', data: { reason: unknownFolder(from) } }),
      };
    }
    function check(node, specifier, typeOnly) {
      if (typeof specifier !== 'string' || !(specifier.startsWith('.') || specifier.startsWith('/'))) return;
      const resolved = path.resolve(path.dirname(context.physicalFilename), specifier);
      const to = path.relative(repoRoot, resolved).split(path.sep).join('/');
      const reason = violation(from, to, typeOnly);
      if (reason !== undefined) context.report({ node, messageId: 'forbidden', data: { reason, target: to } });
    }
    return {
      ImportDeclaration: (node) => check(node.source, node.source.value, node.importKind === 'type'),
      ExportNamedDeclaration: (node) =>
        node.source && check(node.source, node.source.value, node.exportKind === 'type'),
      ExportAllDeclaration: (node) => check(node.source, node.source.value, node.exportKind === 'type'),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node.source, node.source.value, false),
      TSImportEqualsDeclaration: (node) =>
        node.moduleReference.type === 'TSExternalModuleReference' &&
        check(node.moduleReference, node.moduleReference.expression.value, node.importKind === 'type'),
      CallExpression: (node) => {
        const [arg] = node.arguments;
        if (node.callee.type === 'Identifier' && node.callee.name === 'require' && arg?.type === 'Literal')
          check(arg, arg.value, false);
      },
    };
  },
};

export const layeringPlugin = { meta: { name: 'postern-layering' }, rules: { 'may-import': mayImport } };
