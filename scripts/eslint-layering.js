// The may-import table from STYLE.md as an ESLint rule. no-restricted-imports matches import
// strings, which cannot tell `../core/x.js` in broker/contract (forbidden) from `../x.js` in a
// subfolder of it (fine); this rule resolves every relative specifier against the importing file
// and checks the folder it lands in. Node builtins and electron are banned with the stock
// no-restricted-imports rule in eslint.config.js.
import path from 'node:path';

const repoRoot = path.resolve(import.meta.dirname, '..');

/** Folders of broker/ that compose the others (the CLI, the host/runtime seam, the dispatcher, test helpers). */
const compositionFolders = new Set(['cli', 'host', 'testing', 'queue']);
/** What any other broker/ folder (an "I/O folder": journal, channels, vault…) may import. */
const ioFolderMayImport = new Set(['contract', 'core', 'ports']);
const publicEntries = new Set(['broker/host/index.ts', 'broker/host/index.js']);
/**
 * Contract files with no runtime imports (type imports vanish), which the renderer may load at runtime: the method
 * list, and how a decision's actor is worded (so every surface says "person:alice (cli, passphrase on tty)" alike).
 */
const rendererRuntimeContract = new Set([
  'broker/contract/operator-methods.ts',
  'broker/contract/operator-methods.js',
  'broker/contract/operator-actor.ts',
  'broker/contract/operator-actor.js',
]);

/** Layer of a repo-relative path: 'broker/<folder>', 'renderer', 'app', or 'other'. */
function layerOf(relative) {
  const parts = relative.split('/');
  if (parts[0] === 'broker' && parts.length > 2) return `broker/${parts[1]}`;
  if (parts[0] === 'renderer' || parts[0] === 'app') return parts[0];
  return 'other';
}

/** Why `from` may not import `to` (both repo-relative), or undefined when it may. */
function violation(from, to, typeOnly) {
  const source = layerOf(from);
  const target = layerOf(to);
  const isTest = /\.test\.tsx?$/.test(from);
  if (source === 'other' || source === target) return undefined;
  if (source === 'broker/contract') return 'broker/contract imports nothing of ours';
  if (source === 'broker/core') return target === 'broker/contract' ? undefined : 'broker/core may import only broker/contract';
  if (source === 'renderer') {
    if (target !== 'broker/contract') return 'renderer/ may import only types from broker/contract';
    if (typeOnly || rendererRuntimeContract.has(to)) return undefined;
    return 'renderer/ may import broker/contract only with `import type` (no runtime code crosses into the page), except operator-methods.ts and operator-actor.ts';
  }
  if (source === 'app') {
    if (target === 'broker/contract' || publicEntries.has(to)) return undefined;
    return "app/ may import only the broker's public entry (broker/host/index.ts) and broker/contract";
  }
  if (source.startsWith('broker/')) {
    if (target === 'renderer' || target === 'app') return 'broker/ never imports the renderer or the Electron shell';
    if (target === 'broker/testing' && !isTest) return 'production code never imports broker/testing';
    if (isTest || compositionFolders.has(source.slice('broker/'.length))) return undefined;
    if (target.startsWith('broker/') && !ioFolderMayImport.has(target.slice('broker/'.length))) {
      return `${source} may import only broker/contract, broker/core and broker/ports`;
    }
  }
  return undefined;
}

/** @type {import('eslint').Rule.RuleModule} */
const mayImport = {
  meta: {
    type: 'problem',
    docs: { description: 'Enforce the may-import table (STYLE.md) between Postern folders' },
    schema: [],
    messages: { forbidden: '{{reason}} (importing {{target}}).' },
  },
  create(context) {
    const from = path.relative(repoRoot, context.physicalFilename).split(path.sep).join('/');
    if (from.startsWith('..')) return {};
    function check(node, specifier, typeOnly) {
      if (typeof specifier !== 'string' || !(specifier.startsWith('.') || specifier.startsWith('/'))) return;
      const resolved = path.resolve(path.dirname(context.physicalFilename), specifier);
      const to = path.relative(repoRoot, resolved).split(path.sep).join('/');
      const reason = violation(from, to, typeOnly);
      if (reason !== undefined) context.report({ node, messageId: 'forbidden', data: { reason, target: to } });
    }
    return {
      ImportDeclaration: (node) => check(node.source, node.source.value, node.importKind === 'type'),
      ExportNamedDeclaration: (node) => node.source && check(node.source, node.source.value, node.exportKind === 'type'),
      ExportAllDeclaration: (node) => check(node.source, node.source.value, node.exportKind === 'type'),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node.source, node.source.value, false),
      TSImportEqualsDeclaration: (node) =>
        node.moduleReference.type === 'TSExternalModuleReference' &&
        check(node.moduleReference, node.moduleReference.expression.value, node.importKind === 'type'),
      CallExpression: (node) => {
        const [arg] = node.arguments;
        if (node.callee.type === 'Identifier' && node.callee.name === 'require' && arg?.type === 'Literal') check(arg, arg.value, false);
      },
    };
  },
};

export const layeringPlugin = { meta: { name: 'postern-layering' }, rules: { 'may-import': mayImport } };
