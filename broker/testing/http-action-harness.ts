import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { HttpChannel, type HttpLimits, type LookupAll } from '../channels/http/index.js';
import { parseConfig, type PosternConfig } from '../config/index.js';
import type { JournalEvent } from '../contract/index.js';
import { ResultStore, type JournalOpenOptions } from '../journal/index.js';
import type { CredentialVault, DispatchGate } from '../ports/index.js';
import { createRandomIdSource } from '../ports/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { executeHttpAction, type HttpActionDeps, type HttpActionResult } from '../actions/execute-http-action.js';
import type { ExecutorDeps } from '../actions/record-refusal.js';
import { openVault, type Vault } from '../vault/index.js';
import { createCapturedLogger } from './captured-logger.js';
import { openTempJournal, type TempJournal } from './temp-journal.js';

/**
 * Everything an HTTP action needs, real: a temp journal (with its result store), a real vault
 * (Argon2id 'min' in a temp dir) holding the canary credentials, a channel, a pino logger whose
 * lines are kept for the secret search. Counts vault secret uses, to prove validation never
 * touches a secret.
 */
export const canary = 'CANARY-7f3a9c1e-secret-value';
export const canaryUser = 'canary-user';
const passphrase = Buffer.from('correct horse battery staple');

export interface HttpActionHarness {
  readonly temp: TempJournal;
  readonly vault: Vault;
  readonly results: ResultStore;
  readonly logLines: string[];
  readonly envelopes: unknown[];
  readonly secretUses: { count: number };
  channel: HttpChannel;
  /** The approval queue every run waits in (approval none runs straight through, in lane order). */
  queue: ApprovalQueue;
  /** `extra`: executor deps for one run (retry seams: retryTimers, workerId, onLeased, reconcile). */
  run(config: PosternConfig, request: unknown, extra?: Partial<HttpActionDeps>): Promise<HttpActionResult>;
  events(actionId: string): JournalEvent[];
  newChannel(options?: { limits?: Partial<HttpLimits>; lookup?: LookupAll; gate?: DispatchGate }): HttpChannel;
  /**
   * What every executor is built from, this harness's parts under `config`: the real vault (not the counting one `run`
   * uses) and `queue` (the harness's own unless given); a channel is the caller's to add.
   */
  executorDeps(config: PosternConfig, queue?: ApprovalQueue): ExecutorDeps & { readonly queue: ApprovalQueue };
  dispose(): Promise<void>;
}

export async function openHttpActionHarness(
  journal: Pick<JournalOpenOptions, 'beforeSync' | 'laterFlushMs' | 'writerThread' | 'threadBatchEventsMin'> = {},
): Promise<HttpActionHarness> {
  const temp = await openTempJournal(journal);
  const vault = await openCanaryVault(temp);
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker', journal: temp.journal });
  const { logger, lines: logLines } = createCapturedLogger();
  const secretUses = { count: 0 };
  const countingVault = countingVaultOf(vault, secretUses);
  const ids = createRandomIdSource(temp.clock);
  const envelopes: unknown[] = [];
  const newChannel = (
    options: { limits?: Partial<HttpLimits>; lookup?: LookupAll; gate?: DispatchGate } = {},
  ): HttpChannel =>
    new HttpChannel({
      gate: options.gate ?? temp.journal,
      limits: { setupBackoffMsBase: 1, setupBackoffMsMax: 4, ...options.limits },
      ...(options.lookup === undefined ? {} : { lookup: options.lookup }),
    });
  const harness: HttpActionHarness = {
    temp,
    vault,
    results,
    logLines,
    envelopes,
    secretUses,
    channel: newChannel(),
    queue: ApprovalQueue.open({ journal: temp.journal, clock: temp.clock, config: parseConfig('version: 1\n') }),
    async run(config, request, extra = {}) {
      const result = await executeHttpAction(
        {
          ids,
          clock: temp.clock,
          journal: temp.journal,
          results,
          vault: countingVault,
          config,
          channel: harness.channel,
          logger,
          queue: harness.queue,
          ...extra,
        },
        request,
      );
      envelopes.push(
        result.envelope,
        result.response === undefined ? null : { ...result.response, body: result.response.body.toString('latin1') },
      );
      if (result.diagnostic !== undefined)
        envelopes.push({ ...result.diagnostic, body: result.diagnostic.body.toString('latin1') });
      return result;
    },
    events(actionId) {
      return [...temp.journal.events()].filter((e) => e.action_id === actionId);
    },
    newChannel,
    executorDeps: (config, queue) => ({
      ids,
      clock: temp.clock,
      journal: temp.journal,
      results,
      vault,
      config,
      queue: queue ?? harness.queue,
    }),
    async dispose() {
      harness.queue.close();
      harness.channel.close();
      results.close();
      await vault.close();
      await temp.dispose();
    },
  };
  return harness;
}

/** A real vault in the temp dir holding the canary under every injection kind, and one credential bound elsewhere. */
async function openCanaryVault(temp: TempJournal): Promise<Vault> {
  const vaultDir = join(temp.dir.path, 'vault');
  mkdirSync(vaultDir, { mode: 0o700 });
  const vault = await openVault({ dataDir: vaultDir, clock: temp.clock, kdf: 'min', idleLockMs: 0 });
  await vault.init(passphrase);
  const bindings = ['docs', '127.0.0.1', 'localhost'];
  await vault.add({ name: 'docs-token', kind: 'bearer', secret: Buffer.from(canary), bindings });
  await vault.add({
    name: 'docs-header',
    kind: 'header',
    secret: Buffer.from(canary),
    bindings,
    header: 'X-Api-Key',
    template: 'Key {secret}',
  });
  await vault.add({ name: 'docs-query', kind: 'query', secret: Buffer.from(canary), bindings, param: 'api_key' });
  await vault.add({ name: 'docs-basic', kind: 'basic', secret: Buffer.from(`${canaryUser}:${canary}`), bindings });
  await vault.add({
    name: 'unbound-token',
    kind: 'bearer',
    secret: Buffer.from(canary),
    bindings: ['elsewhere.example'],
  });
  return vault;
}

/** The vault as the executor sees it, counting each secret use (validation must never reach one). */
function countingVaultOf(vault: Vault, secretUses: { count: number }): CredentialVault {
  return {
    state: () => vault.state(),
    list: () => vault.list(),
    describe: (name) => vault.describe(name),
    withSecret: (name, use) => {
      secretUses.count += 1;
      return vault.withSecret(name, use);
    },
    wrap: (purpose, plaintext) => vault.wrap(purpose, plaintext),
    unwrap: (purpose, sealed) => vault.unwrap(purpose, sealed),
    onLock: (listener) => vault.onLock(listener),
    onUnlock: (listener) => vault.onUnlock(listener),
  };
}

/** A one-route config pointing at a local server; `extra` is YAML appended to the route. */
export function localRouteConfig(
  port: number,
  extra = '',
  options: {
    scheme?: 'http' | 'https';
    host?: string;
    credential?: string;
    injection?: string;
    name?: string;
    /** The route's path on the remote (default `/api`; `''`: the remote's root, as reflecting-remote.ts routes). */
    basePath?: string;
  } = {},
): PosternConfig {
  const yaml = [
    'version: 1',
    'routes:',
    `  - name: ${options.name ?? 'docs'}`,
    `    base_url: ${options.scheme ?? 'http'}://${options.host ?? '127.0.0.1'}:${port}${options.basePath ?? '/api'}`,
    `    credential: ${options.credential ?? 'docs-token'}`,
    `    injection: ${options.injection ?? 'bearer'}`,
    '    approval: none',
    extra,
  ].join('\n');
  return parseConfig(`${yaml}\n`);
}

/** A route's retry policy as postern.yaml declares it. */
export interface RetryPolicyYaml {
  attempts_max: number;
  automatic: boolean;
  backoff_ms: number;
}

/** The `retry:` block of the route `localRouteConfig` writes (pass it as `extra`). */
export function retryPolicyYaml(policy: RetryPolicyYaml): string {
  return [
    '    retry:',
    `      attempts_max: ${policy.attempts_max}`,
    `      automatic: ${policy.automatic}`,
    `      backoff_ms: ${policy.backoff_ms}`,
  ].join('\n');
}

/**
 * Where the canary could leak, as bytes: every file under the journal's directory except the vault
 * (journal.sqlite, -wal, -shm, whatever else lands there), every log line, every envelope and
 * returned result. Call after closing the journal so nothing is held back in memory.
 */
export function canaryLeaks(harness: HttpActionHarness, searched: string[] = []): string[] {
  const leaks: string[] = [];
  const needle = Buffer.from(canary);
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        if (name !== 'vault') walk(path);
      } else {
        searched.push(path);
        if (readFileSync(path).includes(needle)) leaks.push(path);
      }
    }
  };
  walk(harness.temp.dir.path);
  if (harness.logLines.some((line) => line.includes(canary))) leaks.push('log');
  if (JSON.stringify(harness.envelopes).includes(canary)) leaks.push('envelopes');
  return leaks;
}
