import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

export interface StaticAsset {
  readonly body: Buffer;
  readonly contentType: string;
}

/** Bounds on what the host will hold in memory from the renderer bundle. */
export const assetFilesMax = 500;
export const assetBytesMax = 50 * 1024 * 1024;

const contentTypes: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/**
 * Loads the built renderer into memory once, keyed by URL path ("/assets/x.js"). Serving from a
 * map means no request ever reaches the file system, so there is no path to traverse. Returns an
 * empty map when the bundle is not built (the host then says so instead of serving a blank page).
 */
export function loadStaticAssets(root: string): ReadonlyMap<string, StaticAsset> {
  const assets = new Map<string, StaticAsset>();
  if (!isDirectory(root)) return assets;
  let totalBytes = 0;
  const pending = [root];
  while (pending.length > 0) {
    const dir = pending.pop() as string;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        pending.push(full);
        continue;
      }
      if (!entry.isFile()) continue;
      if (assets.size >= assetFilesMax)
        throw new Error(`renderer bundle at ${root} has more than ${assetFilesMax} files`);
      const body = readFileSync(full);
      totalBytes += body.length;
      if (totalBytes > assetBytesMax) throw new Error(`renderer bundle at ${root} exceeds ${assetBytesMax} bytes`);
      const urlPath = '/' + path.relative(root, full).split(path.sep).join('/');
      const contentType = contentTypes[path.extname(entry.name).toLowerCase()] ?? 'application/octet-stream';
      assets.set(urlPath, { body, contentType });
    }
  }
  return assets;
}

function isDirectory(target: string): boolean {
  try {
    return statSync(target).isDirectory();
  } catch {
    return false;
  }
}
