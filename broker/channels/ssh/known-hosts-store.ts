import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { CredentialVault } from '../../ports/index.js';

/** The file is tiny by nature; anything bigger is damage, not data. */
export const knownHostsBytesMax = 1024 * 1024;
export const knownHostsFileName = 'known_hosts.json';
/** The vault wraps each write's MAC key under this purpose (associated data). */
const macKeyPurpose = 'known-hosts-mac';
const macDomain = 'postern-known-hosts:v1';
const macKeyBytes = 32;
/** Fingerprints are `SHA256:` + 43 base64 characters; the bound only keeps a forged file from costing much. */
const fingerprintCharsMax = 128;

/** What the store needs of the vault: its state and the wrap that keeps the MAC key. */
export type KnownHostsVault = Pick<CredentialVault, 'state' | 'wrap' | 'unwrap'>;

/** What accept_new remembers: host entry name → fingerprint (plus where it pointed when stored). */
interface KnownHost {
  readonly fingerprint: string;
  readonly endpoint: string;
  readonly stored_at_ms: number;
}

/** The file: every entry under one MAC, keyed by a fresh key per write that only the unlocked vault unwraps. */
interface KnownHostsFile<Hosts = Record<string, KnownHost>> {
  readonly version: 1;
  readonly hosts: Hosts;
  /** The HMAC key, sealed by the vault (base64). */
  readonly key: string;
  /** HMAC-SHA256 (hex) over the domain, the version and every entry. */
  readonly mac: string;
}

/** Why nothing in the file can be trusted: each a fixed word the channel records as the setup detail. */
export const knownHostsRefusals = ['vault_locked', 'unreadable', 'damaged', 'unsealed', 'mac_failed'] as const;
export type KnownHostsRefusal = (typeof knownHostsRefusals)[number];

/** The file cannot be trusted (or checked): no key in it is trusted, and it is never treated as empty. */
export class KnownHostsUntrusted extends Error {
  constructor(readonly reason: KnownHostsRefusal) {
    super(`known_hosts.json is not trusted: ${reason}`);
    this.name = 'KnownHostsUntrusted';
  }
}

/** What `storeNew` did: stored the key, or found an entry for that host that appeared since the lookup. */
export type StoreAnswer = { readonly kind: 'stored' } | { readonly kind: 'present'; readonly fingerprint: string };

/**
 * Trust-on-first-use memory for `host_key: accept_new` (`<dataDir>/known_hosts.json`, mode 0600), keyed by host
 * entry name and endpoint, so re-pointing an entry at another address starts over only if the operator edits the
 * config.
 *
 * The agent can write this file (THREAT-MODEL: same user), so it carries a MAC under a key the vault wraps, like the
 * accepted configuration (broker/host/config-integrity.ts): only an unlocked vault can check or forge it. Every read
 * checks it; a file that fails (changed outside Postern, damaged, written without a MAC, or the vault locked so it
 * cannot be checked) throws KnownHostsUntrusted — never an empty store that would trust any key on first use.
 * Writes are whole-file replaces (fresh temp file, fsync, rename, directory fsync): a crash leaves the old file or
 * the new one. A deleted file is first use again for every host (as deleting ~/.ssh/known_hosts is): pins are for
 * hosts where that matters.
 */
export class KnownHostsStore {
  constructor(
    private readonly dir: string,
    private readonly vault: KnownHostsVault,
  ) {}

  get path(): string {
    return join(this.dir, knownHostsFileName);
  }

  /** The stored fingerprint, undefined when none; throws KnownHostsUntrusted when the file cannot be trusted. */
  lookup(hostName: string, endpoint: string): string | undefined {
    return this.read().get(key(hostName, endpoint))?.fingerprint;
  }

  /**
   * Compare-and-set against "absent", the state the lookup saw: stores `fingerprint` only when the file still has
   * no entry for that host. An entry that appeared meanwhile (another action's first use) is left as it is and
   * answered as `present`. Throws KnownHostsUntrusted as lookup does, and the write's own errors.
   */
  storeNew(hostName: string, endpoint: string, fingerprint: string, nowMs: number): StoreAnswer {
    const hosts = this.read();
    const existing = hosts.get(key(hostName, endpoint));
    if (existing !== undefined) return { kind: 'present', fingerprint: existing.fingerprint };
    hosts.set(key(hostName, endpoint), { fingerprint, endpoint, stored_at_ms: nowMs });
    this.write(sealFile(this.vault, hosts));
    return { kind: 'stored' };
  }

  /** The verified entries (absent file: none). The vault must be unlocked even then: no trust decision without it. */
  private read(): Map<string, KnownHost> {
    if (this.vault.state() !== 'unlocked') throw new KnownHostsUntrusted('vault_locked');
    let bytes: Buffer;
    try {
      bytes = readFileSync(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw new KnownHostsUntrusted('unreadable');
    }
    if (bytes.length > knownHostsBytesMax) throw new KnownHostsUntrusted('damaged');
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new KnownHostsUntrusted('damaged');
    }
    const file = shapedFile(value);
    if (file === undefined) throw new KnownHostsUntrusted('unsealed');
    if (!macHolds(this.vault, file)) throw new KnownHostsUntrusted('mac_failed');
    return file.hosts;
  }

  private write(file: KnownHostsFile): void {
    const temp = join(this.dir, `.${knownHostsFileName}.${randomBytes(6).toString('hex')}.tmp`);
    // 'wx' on a fresh random name: never opens a file (or a link) someone placed there.
    const fd = openSync(temp, 'wx', 0o600);
    try {
      writeSync(fd, `${JSON.stringify(file, null, 2)}\n`);
      fsyncSync(fd);
    } catch (error) {
      closeSync(fd);
      rmSync(temp, { force: true });
      throw error;
    }
    closeSync(fd);
    renameSync(temp, this.path);
    const dirFd = openSync(this.dir, 'r');
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
  }
}

function key(hostName: string, endpoint: string): string {
  return `${hostName} ${endpoint}`;
}

/** Every entry, in key order, so the MAC does not depend on how JSON ordered them. */
function macInput(hosts: ReadonlyMap<string, KnownHost>): string {
  const entries = [...hosts.keys()].sort().map((k) => {
    const h = hosts.get(k) as KnownHost;
    return [k, h.fingerprint, h.endpoint, h.stored_at_ms];
  });
  return JSON.stringify([macDomain, 1, entries]);
}

function sealFile(vault: KnownHostsVault, hosts: ReadonlyMap<string, KnownHost>): KnownHostsFile {
  const macKey = randomBytes(macKeyBytes);
  try {
    const wrapped = vault.wrap(macKeyPurpose, macKey);
    return {
      version: 1,
      // fromEntries defines each key as its own property, whatever it is called.
      hosts: Object.fromEntries(hosts),
      key: Buffer.from(wrapped).toString('base64'),
      mac: createHmac('sha256', macKey).update(macInput(hosts)).digest('hex'),
    };
  } finally {
    macKey.fill(0);
  }
}

function macHolds(vault: KnownHostsVault, file: KnownHostsFile<ReadonlyMap<string, KnownHost>>): boolean {
  let macKey: Uint8Array;
  try {
    macKey = vault.unwrap(macKeyPurpose, Buffer.from(file.key, 'base64'));
  } catch {
    return false;
  }
  try {
    const expected = createHmac('sha256', macKey).update(macInput(file.hosts)).digest();
    const given = Buffer.from(file.mac, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  } finally {
    macKey.fill(0);
  }
}

/** The file in the expected shape (its MAC not yet checked), or undefined: an older plain map, or anything else. */
function shapedFile(value: unknown): KnownHostsFile<Map<string, KnownHost>> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const f = value as Partial<KnownHostsFile>;
  if (f.version !== 1 || typeof f.key !== 'string' || typeof f.mac !== 'string' || !/^[0-9a-f]{64}$/.test(f.mac))
    return undefined;
  const hosts = f.hosts as unknown;
  if (typeof hosts !== 'object' || hosts === null || Array.isArray(hosts)) return undefined;
  const shaped = new Map<string, KnownHost>();
  for (const [k, h] of Object.entries(hosts as Record<string, unknown>)) {
    const e = h as Partial<KnownHost> | null;
    if (
      typeof e !== 'object' ||
      e === null ||
      typeof e.fingerprint !== 'string' ||
      e.fingerprint.length > fingerprintCharsMax ||
      typeof e.endpoint !== 'string' ||
      !Number.isSafeInteger(e.stored_at_ms)
    )
      return undefined;
    shaped.set(k, { fingerprint: e.fingerprint, endpoint: e.endpoint, stored_at_ms: e.stored_at_ms as number });
  }
  return { version: 1, hosts: shaped, key: f.key, mac: f.mac };
}
