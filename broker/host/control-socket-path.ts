import path from 'node:path';

/** The control socket's name in a data directory. Its own module, schema-free: `postern status` needs only this. */
export const controlSocketFileName = 'control.sock';

export function controlSocketPath(dataDir: string): string {
  return path.join(dataDir, controlSocketFileName);
}
