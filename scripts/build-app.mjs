#!/usr/bin/env node
// @ts-check
// Bundles the Electron shell: app/main → dist/app/main.mjs (ESM, node_modules left external) and
// app/preload → dist/app/preload.cjs (CommonJS: a sandboxed preload can only require 'electron',
// so everything it uses must be inlined). Usage: node scripts/build-app.mjs [--outdir DIR]
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { writerWorkerPlugin } from './writer-worker-plugin.mjs';

const root = path.resolve(import.meta.dirname, '..');
const { values } = parseArgs({ options: { outdir: { type: 'string', default: path.join(root, 'dist', 'app') } } });
const outdir = path.resolve(values.outdir);

/** @type {import('esbuild').BuildOptions} */
const common = { bundle: true, platform: 'node', sourcemap: 'linked', logLevel: 'warning', absWorkingDir: root };

await build({
  ...common,
  entryPoints: [path.join(root, 'app', 'main', 'main.ts')],
  outfile: path.join(outdir, 'main.mjs'),
  format: 'esm',
  target: 'node22',
  packages: 'external',
  // The journal's writer thread runs a script built from the sources: in the bundle, built now.
  plugins: [writerWorkerPlugin()],
});
await build({
  ...common,
  entryPoints: [path.join(root, 'app', 'preload', 'preload.ts')],
  outfile: path.join(outdir, 'preload.cjs'),
  format: 'cjs',
  target: 'es2023',
  external: ['electron'],
});
process.stdout.write(`built ${path.relative(root, outdir) || '.'}/main.mjs and preload.cjs\n`);
