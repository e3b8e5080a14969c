import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The file is tiny by nature; anything bigger is damage, not data. */
export const knownHostsBytesMax = 1024 * 1024;
export const knownHostsFileName = 'known_hosts.json';

/** What accept_new remembers: host entry name → fingerprint (plus where it pointed when stored). */
interface KnownHost {
  readonly fingerprint: string;
  readonly endpoint: string;
  readonly stored_at_ms: number;
}

/**
 * Trust-on-first-use memory for `host_key: accept_new` (`<dataDir>/known_hosts.json`, mode 0600).
 * Keyed by host entry name and endpoint, so re-pointing an entry at another address starts over
 * only if the operator edits the config. Written by whole-file replace (write temp, fsync, rename):
 * a crash leaves the old file or the new one, never half of one. A damaged file is treated as
 * unreadable and refuses every accept_new host (never as "empty", which would re-trust anything).
 */
export class KnownHostsStore {
  constructor(private readonly dir: string) {}

  get path(): string {
    return join(this.dir, knownHostsFileName);
  }

  /** The stored fingerprint, undefined when none; throws when the file is unreadable. */
  lookup(hostName: string, endpoint: string): string | undefined {
    const entry = this.read()[key(hostName, endpoint)];
    return entry?.fingerprint;
  }

  store(hostName: string, endpoint: string, fingerprint: string, nowMs: number): void {
    const all = this.read();
    all[key(hostName, endpoint)] = { fingerprint, endpoint, stored_at_ms: nowMs };
    const tmp = `${this.path}.tmp-${process.pid}`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, `${JSON.stringify(all, null, 2)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }

  private read(): Record<string, KnownHost> {
    let text: string;
    try {
      const bytes = readFileSync(this.path);
      if (bytes.length > knownHostsBytesMax) throw new Error('known_hosts.json is too large');
      text = bytes.toString('utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw error;
    }
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('known_hosts.json is not an object');
    return parsed as Record<string, KnownHost>;
  }
}

function key(hostName: string, endpoint: string): string {
  return `${hostName} ${endpoint}`;
}
