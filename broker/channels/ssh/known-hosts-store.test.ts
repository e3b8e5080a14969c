import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { KnownHostsStore } from './known-hosts-store.js';

let dir: TempDir | undefined;
afterEach(() => dir?.remove());

describe('when accept_new remembers host keys', () => {
  it('stores by entry and endpoint, mode 0600, and reads back what it stored', () => {
    dir = createTempDir();
    const store = new KnownHostsStore(dir.path);
    expect(store.lookup('lab', 'u@h:22')).toBeUndefined();
    store.store('lab', 'u@h:22', 'SHA256:abc', 1);
    expect(store.lookup('lab', 'u@h:22')).toBe('SHA256:abc');
    expect(store.lookup('lab', 'u@h:2222')).toBeUndefined();
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(store.path, 'utf8'))).toMatchObject({ 'lab u@h:22': { fingerprint: 'SHA256:abc' } });
  });

  it('a damaged file is an error, never an empty store that would trust any key', () => {
    dir = createTempDir();
    const store = new KnownHostsStore(dir.path);
    writeFileSync(store.path, '{"lab u@h:22": ');
    expect(() => store.lookup('lab', 'u@h:22')).toThrow();
  });
});
