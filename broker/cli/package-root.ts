import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The checkout (or installed package) root: broker/cli/ is two levels below it. */
export const packageRoot = fileURLToPath(new URL('../../', import.meta.url));

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : '0.0.0';
}
