import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SshChannel, type SshLimits } from '../channels/ssh/index.js';
import { parseConfig, type PosternConfig } from '../config/index.js';
import type { JournalEvent } from '../contract/index.js';
import { ResultStore, type JournalOpenOptions } from '../journal/index.js';
import { createRandomIdSource, type DispatchGate } from '../ports/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { executeSshAction, type SshActionResult } from '../actions/execute-ssh-action.js';
import { openVault, type Vault } from '../vault/index.js';
import { createCapturedLogger } from './captured-logger.js';
import { MisbehavingSshServer, type SshBehavior } from './misbehaving-ssh-server.js';
import { createTempDir, type TempDir } from './temp-dir.js';
import { openTempJournal, type TempJournal } from './temp-journal.js';
import { generateKey } from './test-sshd.js';

const passphrase = Buffer.from('correct horse battery staple');

export interface SshActionHarness {
  readonly temp: TempJournal;
  readonly vault: Vault;
  readonly results: ResultStore;
  readonly logLines: string[];
  /** Every envelope and output returned, as JSON-able values (for the secret search). */
  readonly returned: unknown[];
  channel: SshChannel;
  /** The approval queue every run waits in (approval none runs straight through, in lane order). */
  queue: ApprovalQueue;
  run(config: PosternConfig, request: unknown, cancel?: AbortSignal): Promise<SshActionResult>;
  events(actionId: string): JournalEvent[];
  newChannel(limits?: Partial<SshLimits>, gate?: DispatchGate): SshChannel;
  dispose(): Promise<void>;
}

/**
 * Everything an SSH action needs, real: a temp journal and result store, a real vault (Argon2id
 * 'min') holding the given OpenSSH private keys as ssh_key credentials, a channel whose
 * known_hosts.json lives in the temp data dir, and a pino logger whose lines are kept.
 */
export async function openSshActionHarness(
  keys: Readonly<Record<string, { privateKey: Buffer; bindings: string[] }>>,
  journal: Pick<JournalOpenOptions, 'laterFlushMs' | 'beforeSync'> = {},
): Promise<SshActionHarness> {
  const temp = await openTempJournal(journal);
  const vaultDir = join(temp.dir.path, 'vault');
  mkdirSync(vaultDir, { mode: 0o700 });
  const vault = await openVault({ dataDir: vaultDir, clock: temp.clock, kdf: 'min', idleLockMs: 0 });
  await vault.init(passphrase);
  for (const [name, key] of Object.entries(keys))
    await vault.add({ name, kind: 'ssh_key', secret: Buffer.from(key.privateKey), bindings: key.bindings });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker', journal: temp.journal });
  const { logger, lines: logLines } = createCapturedLogger();
  const ids = createRandomIdSource(temp.clock);
  const returned: unknown[] = [];
  const newChannel = (limits: Partial<SshLimits> = {}, gate: DispatchGate = temp.journal): SshChannel =>
    new SshChannel({ gate, clock: temp.clock, knownHostsDir: temp.dir.path, vault, limits });
  const harness: SshActionHarness = {
    temp,
    vault,
    results,
    logLines,
    returned,
    channel: newChannel(),
    queue: ApprovalQueue.open({ journal: temp.journal, clock: temp.clock, config: parseConfig('version: 1\n') }),
    async run(config, request, cancel) {
      const result = await executeSshAction(
        {
          ids,
          clock: temp.clock,
          journal: temp.journal,
          results,
          vault,
          config,
          channel: harness.channel,
          logger,
          queue: harness.queue,
        },
        request,
        cancel,
      );
      returned.push(result.envelope);
      if (result.output !== undefined)
        returned.push({
          ...result.output,
          stdout: result.output.stdout.toString('latin1'),
          stderr: result.output.stderr.toString('latin1'),
        });
      return result;
    },
    events(actionId) {
      return [...temp.journal.events()].filter((e) => e.action_id === actionId);
    },
    newChannel,
    async dispose() {
      harness.queue.close();
      results.close();
      await vault.close();
      await temp.dispose();
    },
  };
  return harness;
}

export interface SshHostYaml {
  readonly name?: string;
  readonly host?: string;
  readonly port: number;
  readonly user: string;
  readonly credential: string;
  /** `accept_new` or a list of pins. */
  readonly hostKey: 'accept_new' | readonly string[];
  readonly extra?: string;
}

/** postern.yaml's `ssh_hosts:` section with the given entries (approval none unless `extra` says otherwise), as lines. */
export function sshHostsYaml(hosts: readonly SshHostYaml[]): string[] {
  return [
    'ssh_hosts:',
    ...hosts.flatMap((h) => [
      `  - name: ${h.name ?? 'lab'}`,
      `    host: ${h.host ?? '127.0.0.1'}`,
      `    port: ${h.port}`,
      `    user: ${h.user}`,
      `    credential: ${h.credential}`,
      h.hostKey === 'accept_new' ? '    host_key: accept_new' : `    host_key: {pinned: [${h.hostKey.join(', ')}]}`,
      h.extra ?? '    approval: none',
    ]),
  ];
}

/** A config with the given SSH host entries (sshHostsYaml). */
export function sshHostsConfig(hosts: readonly SshHostYaml[]): PosternConfig {
  return parseConfig(`${['version: 1', ...sshHostsYaml(hosts)].join('\n')}\n`);
}

/** A harness and the scripted remote it talks to. */
export interface MisbehavingPair {
  readonly h: SshActionHarness;
  readonly s: MisbehavingSshServer;
}

export interface MisbehavingHarnesses {
  /** A harness holding the key as `lab-key` (bound to `lab`), and a server behaving as told, writing beside it. */
  open(behavior: SshBehavior): Promise<MisbehavingPair>;
  /** Something else of the case's own to close with what `open` opened. */
  defer(cleanup: () => Promise<void> | void): void;
  /** Closes what the case opened, latest first: the file's afterEach. */
  closeOpened(): Promise<void>;
  /** Removes the key's directory: the file's afterAll. */
  remove(): void;
}

/**
 * For a test file whose cases each run SSH actions against one misbehaving server: one agent key for the whole file,
 * made (with `keyComment`) on the first `open`, and every harness and server a case opens closed after it. The file
 * calls `closeOpened` after each case and `remove` after all of them.
 */
export function misbehavingHarnesses(keyComment: string): MisbehavingHarnesses {
  let keyDir: TempDir | undefined;
  let privateKey: Buffer | undefined;
  const cleanups: Array<() => Promise<void> | void> = [];
  const key = (): Buffer => {
    if (privateKey === undefined) {
      keyDir = createTempDir('postern-ssh-keys-');
      privateKey = generateKey(keyDir.path, 'agent', keyComment).privateKey;
    }
    return privateKey;
  };
  return {
    async open(behavior) {
      const h = await openSshActionHarness({ 'lab-key': { privateKey: key(), bindings: ['lab'] } });
      cleanups.push(() => h.dispose());
      const s = await MisbehavingSshServer.start(behavior, { journalPath: h.temp.path });
      cleanups.push(() => s.stop());
      return { h, s };
    },
    defer(cleanup) {
      cleanups.push(cleanup);
    },
    async closeOpened() {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    },
    remove() {
      keyDir?.remove();
    },
  };
}

/** The config of host `lab` on the misbehaving server `s` (user agent, credential lab-key, its host key pinned). */
export function misbehavingHostConfig(s: MisbehavingSshServer): PosternConfig {
  return sshHostsConfig([{ port: s.port, user: 'agent', credential: 'lab-key', hostKey: [s.hostKeyFingerprint] }]);
}

/** Waits (bounded, 5 s) until the journal holds an event of `kind`, the action got that far; its action id. */
export async function journalReached(h: SshActionHarness, kind: JournalEvent['kind']): Promise<string> {
  for (let i = 0; i < 500; i += 1) {
    const event = [...h.temp.journal.events()].find((e) => e.kind === kind);
    if (event !== undefined) return event.action_id ?? '';
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no ${kind} within 5 s`);
}

/**
 * Every place a secret could leak, searched as bytes for each needle: every file under the data
 * dir (journal.sqlite with -wal/-shm, known_hosts.json, the vault files), the log lines, and every
 * returned envelope and output. Call after closing the journal.
 */
export function secretLeaks(harness: SshActionHarness, needles: readonly string[], searched: string[] = []): string[] {
  const leaks: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        searched.push(path);
        const bytes = readFileSync(path);
        for (const needle of needles)
          if (bytes.includes(Buffer.from(needle))) leaks.push(`${path}: ${needle.slice(0, 12)}…`);
      }
    }
  };
  walk(harness.temp.dir.path);
  const logs = harness.logLines.join('');
  const json = JSON.stringify(harness.returned);
  for (const needle of needles) {
    if (logs.includes(needle)) leaks.push('log');
    if (json.includes(needle)) leaks.push('returned');
  }
  return leaks;
}
