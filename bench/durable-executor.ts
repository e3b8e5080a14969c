/**
 * The broker side of bench/durable.ts for the in-process executor, as its own process so it can run
 * under strace and so the target servers (in the orchestrator) do not share its event loop. Driven
 * over Node IPC, one request at a time: `direct` (undici straight to a target), `broker`
 * (executeHttpAction: approval none, bearer from a real vault, journal with fsync, result store) and
 * `ceiling` (the journal alone, group commit, replaying the event mix the broker just wrote).
 *
 *   forked by bench/durable.ts; not run on its own.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { executeHttpAction } from '../broker/actions/execute-http-action.js';
import { HttpChannel } from '../broker/channels/http/index.js';
import { parseConfig } from '../broker/config/index.js';
import { ResultStore } from '../broker/journal/index.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { ApprovalQueue } from '../broker/queue/approval-queue.js';
import { openTempJournal, type TempJournal } from '../broker/testing/temp-journal.js';
import { openVault } from '../broker/vault/index.js';
import { drive, type Summary } from './durable-measure.js';
import { PhaseClock, type PhaseRow } from './durable-phases.js';
import { JournalCapture, replayCeiling } from './journal-ceiling.js';
import { measureHandoff, type Handoff } from './writer-handoff.js';
import { measureCommitPages, type CommitPages } from './commit-pages.js';

/** fast: loopback, answered at once; slow: after 20 ms; ids: after 20 ms with the id headers an API sends (durable.ts). */
export type Target = 'fast' | 'slow' | 'ids';
export type ExecutorRequest =
  | { op: 'setup'; origins: Record<Target, string> }
  | { op: 'direct'; target: Target; concurrency: number; runMs: number; opsMax: number }
  | { op: 'broker'; target: Target; concurrency: number; runMs: number; opsMax: number }
  | { op: 'ceiling'; concurrency: number; runMs: number }
  | { op: 'handoff'; batchActions: number }
  | { op: 'pages'; target: Target; actions: number }
  | { op: 'phases'; target: Target; concurrency: number; runMs: number; opsMax: number }
  | { op: 'exit' };
export type ExecutorReply =
  | {
      ok: true;
      pid: number;
      summary?: Summary;
      eventsPerAction?: number;
      mix?: string;
      phases?: { rows: PhaseRow[]; actions: number; total: PhaseRow };
      handoff?: Handoff;
      pages?: CommitPages;
    }
  | { ok: false; error: string };

const body = JSON.stringify({ title: 'bench', n: 1 });
const connectionsMax = 64;
/** The first actions pay for warm-up paths; the last of these is the one the ceiling replays. */
const capturedActions = 3;

interface Rig {
  temp: TempJournal;
  results: ResultStore;
  agent: Agent;
  origins: Record<Target, string>;
  broker: (target: Target) => Promise<void>;
  capture: JournalCapture;
  phases: PhaseClock;
  close(): Promise<void>;
}

async function openRig(origins: Record<Target, string>): Promise<Rig> {
  // As the daemon runs it (broker-runtime.ts): the writer thread, small batches on the loop.
  const temp = await openTempJournal({ writerThread: 'on-demand' });
  const vaultDir = join(temp.dir.path, 'vault');
  mkdirSync(vaultDir);
  const vault = await openVault({ dataDir: vaultDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from('bench passphrase'));
  await vault.add({
    name: 'bench-token',
    kind: 'bearer',
    secret: Buffer.from('bench-secret'),
    bindings: ['fast', 'slow', 'ids'],
  });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  const route = (name: Target): string[] => [
    `  - name: ${name}`,
    `    base_url: ${origins[name]}/api`,
    '    credential: bench-token',
    '    injection: bearer',
    '    approval: none',
    // One lane per document: the bench measures the broker, not the serialization of one lane.
    '    lanes:',
    "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }",
  ];
  const config = parseConfig(
    ['version: 1', 'routes:', ...route('fast'), ...route('slow'), ...route('ids'), ''].join('\n'),
  );
  const capture = new JournalCapture(temp.journal, capturedActions);
  // Outermost: the timed phases see the broker's calls, the capture below them keeps its few actions as before.
  const phases = new PhaseClock(capture.journal);
  const rig: Rig = {
    temp,
    results,
    origins,
    agent: new Agent({ connections: connectionsMax, pipelining: 1 }),
    capture,
    phases,
    broker: async () => undefined,
    close: async () => undefined,
  };
  const journal = phases.journal;
  const channel = new HttpChannel({ gate: journal, limits: { idleConnectionsMax: connectionsMax } });
  const queue = ApprovalQueue.open({ journal, clock: systemClock, config });
  const deps = {
    ids: createRandomIdSource(systemClock),
    clock: systemClock,
    journal,
    results: rig.capture.results(results),
    vault,
    config,
    channel,
    queue,
  };
  let documents = 0;
  rig.broker = async (target) => {
    documents += 1;
    const input = { route: target, method: 'POST', path: `/documents/${documents}`, body, headers: {} };
    const startMs = performance.now();
    const r = await rig.capture.run(() =>
      executeHttpAction(deps, { ...input, headers: { 'content-type': 'application/json' } }),
    );
    rig.phases.op(r.envelope.invocation_id, startMs, performance.now());
    const error = r.envelope.error;
    // Which phase stopped and what the envelope's evidence says (the agent's own answer: no secret in it), so a failed
    // run says where a failure came from, not only that there was one.
    if (error !== undefined)
      throw new Error(
        `broker: ${error.code} at ${error.phase} (${r.envelope.outcome_basis ?? 'no basis'}): ${error.message}; ` +
          `evidence ${JSON.stringify(r.envelope.evidence)}`,
      );
  };
  rig.close = async () => {
    channel.close();
    await rig.agent.close();
    results.close();
    await vault.close();
    await temp.dispose();
  };
  return rig;
}

async function direct(rig: Rig, target: Target): Promise<void> {
  const res = await request(`${rig.origins[target]}/api/documents/7`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
    dispatcher: rig.agent,
  });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`direct: ${res.statusCode}`);
}

async function handle(rig: Rig | undefined, message: ExecutorRequest): Promise<{ rig?: Rig; reply: ExecutorReply }> {
  const pid = process.pid;
  if (message.op === 'setup') return { rig: await openRig(message.origins), reply: { ok: true, pid } };
  if (rig === undefined) throw new Error(`${message.op} before setup`);
  if (message.op === 'direct') {
    const summary = await drive(() => direct(rig, message.target), message.concurrency, message);
    return { reply: { ok: true, pid, summary } };
  }
  if (message.op === 'broker') {
    const eventsBefore = rig.temp.journal.stats().events;
    const summary = await drive(() => rig.broker(message.target), message.concurrency, message);
    const eventsPerAction = (rig.temp.journal.stats().events - eventsBefore) / summary.count;
    return { reply: { ok: true, pid, summary, eventsPerAction } };
  }
  if (message.op === 'phases') {
    rig.phases.start();
    const summary = await drive(() => rig.broker(message.target), message.concurrency, message);
    return { reply: { ok: true, pid, summary, phases: rig.phases.rows() } };
  }
  if (message.op === 'ceiling') {
    const captured = rig.capture.captured();
    if (captured === undefined) throw new Error('ceiling before any broker action was captured');
    const ceiling = await replayCeiling(captured, message.concurrency, message.runMs);
    return {
      reply: { ok: true, pid, summary: ceiling.summary, eventsPerAction: ceiling.eventsPerAction, mix: ceiling.mix },
    };
  }
  if (message.op === 'handoff') {
    const captured = rig.capture.captured();
    if (captured === undefined) throw new Error('handoff before any broker action was captured');
    return { reply: { ok: true, pid, handoff: await measureHandoff(captured, message.batchActions) } };
  }
  if (message.op === 'pages') {
    const { journal, path } = rig.temp;
    const pages = await measureCommitPages(
      path,
      message.actions,
      () => rig.broker(message.target),
      () => journal.durable(),
    );
    return { reply: { ok: true, pid, pages } };
  }
  await rig.close();
  return { reply: { ok: true, pid } };
}

let current: Rig | undefined;
let chain = Promise.resolve();
process.on('message', (message: ExecutorRequest) => {
  chain = chain.then(async () => {
    try {
      const { rig, reply } = await handle(current, message);
      current = rig ?? current;
      process.send?.(reply);
      if (message.op === 'exit') process.disconnect();
    } catch (error) {
      process.send?.({ ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    }
  });
});
process.send?.({ ok: true, pid: process.pid });
