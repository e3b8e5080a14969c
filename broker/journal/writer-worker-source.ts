import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as Esbuild from 'esbuild';

/**
 * The writer thread's script (writer-worker.ts bundled into one CommonJS script, every npm package external), which
 * WriterThread evaluates in a worker: the same bundle in every runner. Run from the sources (tsx, vitest) it is built
 * here with esbuild on first use (~150 ms, once per process); the CLI and app bundles replace this module with the
 * script built at bundle time (scripts/writer-worker-plugin.mjs), so nothing ships that needs esbuild or the sources.
 */
let built: string | undefined;

export function writerWorkerSource(): string {
  built ??= buildFromSources();
  return built;
}

function buildFromSources(): string {
  const require = createRequire(import.meta.url);
  const esbuild = require('esbuild') as typeof Esbuild;
  const result = esbuild.buildSync({
    entryPoints: [fileURLToPath(new URL('./writer-worker.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    packages: 'external',
    // As scripts/writer-worker-plugin.mjs builds it for the bundles: Postern's own tsconfig.
    tsconfig: fileURLToPath(new URL('../../tsconfig.base.json', import.meta.url)),
    write: false,
    logLevel: 'silent',
  });
  const script = result.outputFiles[0]?.text;
  if (script === undefined) throw new Error('esbuild produced no writer thread script');
  return script;
}
