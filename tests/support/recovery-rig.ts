import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BrokerApi, JournalEvent } from '../../broker/contract/index.js';
import { Journal } from '../../broker/journal/index.js';
import { systemClock } from '../../broker/ports/index.js';
import { openVault } from '../../broker/vault/index.js';
import { op, waitFor } from './drill.js';
import { startDaemon, type Exit, type RunningDaemon } from './postern-process.js';
import { acceptConfigAsPerson } from './accepted-config.js';
import { unlockAsPerson } from './person-decision.js';

/** Bound on waiting for something that is already on its way (an agent's answer after a crash, a CLI). */
export const settleWaitMs = 30_000;

export interface RouteOptions {
  /** Where the route sends (the target, or a HoldingProxy in front of it). */
  port: number;
  /** The route's retry policy; absent: no retry policy at all (unknown leaves by reconciliation or a person). */
  retry?: { attempts_max: number; automatic: boolean; backoff_ms: number };
}

/**
 * One data directory for the restart tests: a vault (fast KDF, test only) holding the route's
 * bearer credential, a passphrase file the daemon unlocks with at every start, postern.yaml with
 * route `docs` (approval none, observe sessions, POST, an idempotency contract and a lookup at
 * /operations/{idempotency_key}, optionally a retry policy). `start()` runs `postern daemon`;
 * `crash()` SIGKILLs it (no shutdown path runs); a new `start()` on the same directory is the
 * restart, unlocked again from the passphrase file.
 */
export class RecoveryRig {
  daemon: RunningDaemon | undefined;
  private constructor(
    readonly dataDir: string,
    private readonly passphrase: string,
    private readonly passphraseFile: string,
  ) {}

  static async create(scratch: string, name: string, route: RouteOptions): Promise<RecoveryRig> {
    const dataDir = path.join(scratch, name);
    mkdirSync(dataDir, { mode: 0o700 });
    const passphrase = `recovery passphrase ${name} (test only)`;
    const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await vault.init(Buffer.from(passphrase));
    await vault.add({
      name: 'rr-token',
      kind: 'bearer',
      secret: Buffer.from('CANARY-rr-token-never-shown'),
      bindings: ['docs', '127.0.0.1'],
    });
    await vault.close();
    const passphraseFile = path.join(scratch, `${name}.pass`);
    writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
    writeFileSync(
      path.join(dataDir, 'postern.yaml'),
      [
        'version: 1',
        // Reconcile and retry are decisions; the rig runs them without a terminal (the CI opt-out).
        'operator:',
        '  unattended_decisions: true',
        'agents:',
        '  session_approval: observe',
        'routes:',
        '  - name: docs',
        `    base_url: http://127.0.0.1:${route.port}`,
        '    credential: rr-token',
        '    injection: bearer',
        '    approval: none',
        '    methods: [POST]',
        '    idempotency: { header: Idempotency-Key, scope: docs.account, retention_seconds: 86400, fingerprint: [method, path, body] }',
        "    lookup: { method: GET, path: '/operations/{idempotency_key}' }",
        ...(route.retry === undefined
          ? []
          : [
              `    retry: { attempts_max: ${route.retry.attempts_max}, automatic: ${route.retry.automatic}, backoff_ms: ${route.retry.backoff_ms} }`,
            ]),
        '',
      ].join('\n'),
    );
    await acceptConfigAsPerson(dataDir, passphraseFile);
    return new RecoveryRig(dataDir, passphrase, passphraseFile);
  }

  /** Starts `postern daemon` on this directory, unlocked from the passphrase file (a start, or the restart). */
  async start(): Promise<RunningDaemon> {
    if (this.daemon !== undefined) throw new Error('a daemon of this rig is still running');
    this.daemon = await startDaemon(this.dataDir, { env: { POSTERN_PASSPHRASE_FILE: this.passphraseFile } });
    return this.daemon;
  }

  /** Starts `postern daemon` on this directory locked (no passphrase file): a person unlocks it later (`unlock`). */
  async startLocked(): Promise<RunningDaemon> {
    if (this.daemon !== undefined) throw new Error('a daemon of this rig is still running');
    this.daemon = await startDaemon(this.dataDir, { env: { POSTERN_PASSPHRASE_FILE: undefined } });
    return this.daemon;
  }

  /** What `postern vault unlock` sends when a person types the passphrase on its terminal. */
  unlock(): Promise<void> {
    this.running();
    return unlockAsPerson(this.dataDir, this.passphrase);
  }

  /** SIGKILL: a crash, no shutdown path runs. */
  async crash(): Promise<Exit> {
    const daemon = this.running();
    this.daemon = undefined;
    return daemon.process.stop('SIGKILL');
  }

  /** A clean stop (SIGTERM), e.g. before reading the journal offline. */
  async stop(): Promise<Exit | undefined> {
    const daemon = this.daemon;
    this.daemon = undefined;
    return daemon?.process.stop('SIGTERM');
  }

  show(actionId: string): Promise<BrokerApi['actions.show']['output']> {
    this.running();
    return op(this.dataDir, 'actions.show', { action_id: actionId });
  }

  /** The one action accepted for this target text (e.g. `route:docs POST /releases`), waited for. */
  async acceptedAction(target: string, fromSeq = 1): Promise<string> {
    this.running();
    const rows = await waitFor(
      () => op(this.dataDir, 'activity.list', { from_seq: fromSeq, limit: 1000 }),
      (r) => r.events.some((e) => e.kind === 'ACTION_ACCEPTED' && e.summary.includes(target)),
      `an ACTION_ACCEPTED for ${target}`,
    );
    const found = rows.events.filter((e) => e.kind === 'ACTION_ACCEPTED' && e.summary.includes(target));
    if (found.length !== 1) throw new Error(`expected one ACTION_ACCEPTED for ${target}, found ${found.length}`);
    return (found[0] as { action_id: string }).action_id;
  }

  /** The journal read after the daemon stopped: every event of the action, decrypted with the vault. */
  async journalEvents(actionId: string): Promise<JournalEvent[]> {
    if (this.daemon !== undefined) throw new Error('stop the daemon before reading its journal');
    const vault = await openVault({ dataDir: this.dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    try {
      await vault.unlock(Buffer.from(this.passphrase));
      const journal = await Journal.open({ dataDir: this.dataDir, clock: systemClock, vault });
      try {
        return journal.subjectEvents(actionId);
      } finally {
        await journal.close();
      }
    } finally {
      await vault.close();
    }
  }

  private running(): RunningDaemon {
    if (this.daemon === undefined) throw new Error('no daemon of this rig is running');
    return this.daemon;
  }
}

/** Resolves or rejects with the promise, or rejects after `ms` (every wait in these tests is bounded). */
export function within<T>(promise: Promise<T>, what: string, ms = settleWaitMs): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Waits (bounded, no sleep) until a local count reaches a value: the target's or the proxy's arrivals. */
export function waitForCount(read: () => number, count: number, what: string): Promise<number> {
  return waitFor(
    () => Promise.resolve(read()),
    (n) => n >= count,
    what,
  );
}
