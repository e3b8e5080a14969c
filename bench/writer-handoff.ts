/**
 * Issue 18's writer thread (docs/journal-writer-thread.md): what handing the planned batches to the writer thread
 * costs, measured on the broker's own event mix. The captured action is replayed for `batchActions` fresh ids at once
 * (each id's calls awaited in order, as the broker does) on a fresh journal whose every batch goes to the writer thread,
 * and every `WriteBatch` the journal's planner posts to the thread is kept: exactly what crosses, whatever the planner
 * puts in it. Timed over all of them: V8's serializer (what postMessage runs on the sending thread), its deserializer
 * (the worker's side), and a postMessage round trip of the largest batch to an idle worker that answers with a count
 * (the hand-off and the ack, nothing written). The serialized size is exact, with the action rows' share of it.
 * node:v8's serializer writes only a typed array's own bytes, but postMessage's structured clone copies the whole
 * ArrayBuffer behind it: `structuredClone` (a copy made as postMessage makes it, both sides) is timed too, and the
 * bytes that typed arrays sharing a larger buffer drag along are counted, each such buffer once per batch as the
 * clone copies it (0 since sealed rows own their nonce; before, each batch with results carried the nonce pool's 6 KiB).
 */
import { performance } from 'node:perf_hooks';
import { deserialize, serialize } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { ResultStore } from '../broker/journal/index.js';
import type { WriteBatch } from '../broker/journal/journal-writer.js';
import { WriterThread } from '../broker/journal/writer-thread.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { percentile } from './durable-measure.js';
import { replayAction, type CapturedAction } from './journal-ceiling.js';

export interface Handoff {
  readonly actions: number;
  /** The batches the planner posted for them, and their events. */
  readonly batches: number;
  readonly events: number;
  /** Serialized, all batches. */
  readonly bytes: number;
  /** Of `bytes`: the action rows (WriteBatch.actions) alone. */
  readonly actionRowBytes: number;
  /** All batches, p50 ms. */
  readonly serializeMs: number;
  readonly deserializeMs: number;
  /** All batches through structuredClone (postMessage's serializer and deserializer), p50 ms. */
  readonly cloneMs: number;
  /** Typed arrays that are views into a larger ArrayBuffer, and those buffers' bytes (each once per batch, as cloned). */
  readonly sharedViews: number;
  readonly sharedViewExtraBytes: number;
  /** The largest batch's round trip, p50 ms, and its events. */
  readonly roundTripMs: number;
  readonly roundTripEvents: number;
  /** An empty message's round trip to the same worker, p50 ms: the hop alone. */
  readonly emptyRoundTripMs: number;
}

const repeats = 200;

export async function measureHandoff(action: CapturedAction, batchActions: number): Promise<Handoff> {
  const batches = await plannedBatches(action, batchActions);
  const serializeMs = timed(() => batches.map((batch) => serialize(batch)));
  const bytes = batches.map((batch) => serialize(batch));
  const deserializeMs = timed(() => bytes.map((b) => deserialize(b) as unknown));
  const cloneMs = timed(() => batches.map((batch) => structuredClone(batch)));
  const shared = batches.map((batch) => sharedViews(batch));
  const largest = batches.reduce((a, b) => (b.events.length > a.events.length ? b : a));
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     parentPort.on('message', (m) => parentPort.postMessage(m === null ? 0 : m.events.length));`,
    { eval: true },
  );
  try {
    const roundTripMs = await roundTrips(worker, largest);
    const emptyRoundTripMs = await roundTrips(worker, null);
    return {
      actions: batchActions,
      batches: batches.length,
      events: batches.reduce((n, batch) => n + batch.events.length, 0),
      bytes: bytes.reduce((n, b) => n + b.length, 0),
      actionRowBytes: batches.reduce((n, batch) => n + serialize(batch.actions).length, 0),
      serializeMs,
      deserializeMs,
      cloneMs,
      sharedViews: shared.reduce((n, views) => n + views.length, 0),
      sharedViewExtraBytes: shared.reduce(
        (n, views) => n + [...new Set(views.map((view) => view.buffer))].reduce((m, b) => m + b.byteLength, 0),
        0,
      ),
      roundTripMs,
      roundTripEvents: largest.events.length,
      emptyRoundTripMs,
    };
  } finally {
    await worker.terminate();
  }
}

/**
 * The captured action replayed for `count` fresh ids at once; every batch the planner posted to the writer thread for
 * them, as posted (the thread's `commit` is wrapped for the run: it still writes each one).
 */
async function plannedBatches(action: CapturedAction, count: number): Promise<WriteBatch[]> {
  const temp = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  const ids = createRandomIdSource(systemClock);
  const batches: WriteBatch[] = [];
  const commit = WriterThread.prototype.commit;
  WriterThread.prototype.commit = function (this: WriterThread, batch, base, done) {
    batches.push(batch);
    commit.call(this, batch, base, done);
  };
  try {
    await temp.journal.durable();
    batches.length = 0;
    await Promise.all(
      Array.from({ length: count }, (_, i) =>
        replayAction(temp.journal, results, action, ids.newActionId(), `handoff-${i}`),
      ),
    );
    if (batches.length === 0) throw new Error('the replay posted no batch to the writer thread');
    if (!batches.some((batch) => batch.rows.length > 0))
      throw new Error('the captured action committed no result: not the broker mix');
    return batches;
  } finally {
    WriterThread.prototype.commit = commit;
    results.close();
    await temp.dispose();
  }
}

/** Every typed array in `value` that is a view into a larger ArrayBuffer (postMessage copies all of that buffer). */
function sharedViews(value: unknown, found: ArrayBufferView[] = []): ArrayBufferView[] {
  if (value === null || typeof value !== 'object') return found;
  if (ArrayBuffer.isView(value)) {
    if (value.byteLength !== value.buffer.byteLength) found.push(value);
    return found;
  }
  for (const item of Object.values(value as Record<string, unknown>)) sharedViews(item, found);
  return found;
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

async function roundTrips(worker: Worker, message: WriteBatch | null): Promise<number> {
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
