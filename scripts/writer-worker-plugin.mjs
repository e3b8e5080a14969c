// @ts-check
// An esbuild plugin for the CLI and app bundles: replaces broker/journal/writer-worker-source.ts (which builds the
// journal's writer thread from the sources at run time, with esbuild) by a module that returns the same script built
// now, so a bundle needs neither esbuild nor the sources at run time.
import path from 'node:path';
import { build } from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');

/**
 * @param {(inputs: Record<string, { bytes: number }>) => void} [onInputs] told the writer script's own inputs (paths
 *   relative to the package root), for a bundle's stamp
 * @returns {import('esbuild').Plugin}
 */
export const writerWorkerPlugin = (onInputs) => ({
  name: 'postern-writer-worker',
  setup(pluginBuild) {
    pluginBuild.onLoad({ filter: /[\\/]broker[\\/]journal[\\/]writer-worker-source\.ts$/ }, async () => {
      const result = await build({
        absWorkingDir: root,
        entryPoints: [path.join(root, 'broker', 'journal', 'writer-worker.ts')],
        bundle: true,
        platform: 'node',
        format: 'cjs',
        target: 'node20',
        packages: 'external',
        tsconfig: path.join(root, 'tsconfig.base.json'),
        write: false,
        logLevel: 'warning',
        metafile: true,
      });
      const script = result.outputFiles[0]?.text;
      if (script === undefined) throw new Error('esbuild produced no writer thread script');
      onInputs?.(result.metafile.inputs);
      return {
        contents: `export function writerWorkerSource() { return ${JSON.stringify(script)}; }\n`,
        loader: 'js',
        // The bundle is rebuilt (and its stamp moves) when any source of the writer changes.
        watchFiles: Object.keys(result.metafile.inputs).map((input) => path.join(root, input)),
      };
    });
  },
});
