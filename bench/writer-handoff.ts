/**
 * Issue 18's writer thread, phase 0 (docs/journal-writer-thread.md): what handing one group commit's planned rows to
 * a worker thread would cost the event loop, measured on the broker's own event mix. The captured action is replayed
 * for `batchActions` fresh ids on a fresh journal; what a writer would receive for them — every event with its payload,
 * the action's state after each of its journal calls, the result it committed — is one batch. Timed: V8's serializer
 * (what postMessage runs on the sending thread), its deserializer (the worker's side), and a postMessage round trip to
 * an idle worker that answers with a count (the hand-off and the ack, nothing written).
 */
import { performance } from 'node:perf_hooks';
import { deserialize, serialize } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { ActionState, JournalEvent } from '../broker/contract/index.js';
import { ResultStore } from '../broker/journal/index.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { percentile } from './durable-measure.js';
import { replayAction, type CapturedAction } from './journal-ceiling.js';

export interface Handoff {
  readonly actions: number;
  readonly events: number;
  readonly bytes: number;
  /** Per batch, p50 ms. */
  readonly serializeMs: number;
  readonly deserializeMs: number;
  readonly roundTripMs: number;
  /** An empty message's round trip to the same worker, p50 ms: the hop alone. */
  readonly emptyRoundTripMs: number;
}

interface Batch {
  events: JournalEvent[];
  states: ActionState[];
  results: unknown[];
}

const repeats = 200;

export async function measureHandoff(action: CapturedAction, batchActions: number): Promise<Handoff> {
  const batch = await plannedBatch(action, batchActions);
  const serializeMs = timed(() => serialize(batch));
  const bytes = serialize(batch);
  const deserializeMs = timed(() => deserialize(bytes));
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     parentPort.on('message', (m) => parentPort.postMessage(m === null ? 0 : m.events.length));`,
    { eval: true },
  );
  try {
    const roundTripMs = await roundTrips(worker, batch);
    const emptyRoundTripMs = await roundTrips(worker, null);
    return {
      actions: batchActions,
      events: batch.events.length,
      bytes: bytes.length,
      serializeMs,
      deserializeMs,
      roundTripMs,
      emptyRoundTripMs,
    };
  } finally {
    await worker.terminate();
  }
}

/** The captured action replayed `count` times; the writer's input for all of them as one batch. */
async function plannedBatch(action: CapturedAction, count: number): Promise<Batch> {
  const temp = await openTempJournal();
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  const ids = createRandomIdSource(systemClock);
  const batch: Batch = { events: [], states: [], results: [] };
  try {
    for (let i = 0; i < count; i += 1) {
      const id = ids.newActionId();
      await replayAction(temp.journal, results, action, id, `handoff-${i}`);
      batch.events.push(...temp.journal.subjectEvents(id));
      const state = temp.journal.getAction(id);
      if (state === undefined) throw new Error(`the replayed action ${id} has no state`);
      // The writer gets the state each commit leaves (one per journal call of the action), not only the last.
      for (let c = 0; c < action.calls.length; c += 1) batch.states.push(state);
      batch.results.push(...action.calls.flatMap((c) => c.args.filter((a) => isResultRows(a))));
    }
    if (batch.results.length === 0) throw new Error('the captured action committed no result: not the broker mix');
    return batch;
  } finally {
    results.close();
    await temp.dispose();
  }
}

function isResultRows(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'resultRows' in value;
}

function timed(work: () => unknown): number {
  const samples: number[] = [];
  for (let i = 0; i < repeats; i += 1) {
    const t0 = performance.now();
    work();
    samples.push(performance.now() - t0);
  }
  return percentile(samples, 50);
}

async function roundTrips(worker: Worker, message: Batch | null): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < repeats; i += 1) {
    const t0 = performance.now();
    const answered = new Promise<number>((resolve) => worker.once('message', resolve));
    worker.postMessage(message);
    const n = await answered;
    if (message !== null && n !== message.events.length) throw new Error(`the worker counted ${n} events`);
    samples.push(performance.now() - t0);
  }
  return percentile(samples, 50);
}
