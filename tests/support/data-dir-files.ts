import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Every regular file under `dir` (the journal, its -wal, the vault, anything else a daemon wrote). */
export function filesUnder(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) files.push(...filesUnder(full));
    else if (entry.isFile()) files.push(full);
  }
  return files;
}

/** The files under `dir` whose bytes contain `needle` (a canary): a test expects none. */
export function filesHolding(dir: string, needle: Buffer): string[] {
  return filesUnder(dir).filter((file) => readFileSync(file).includes(needle));
}
