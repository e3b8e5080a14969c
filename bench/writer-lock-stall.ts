/**
 * Issue 18, "nothing synchronous on the loop" (docs/journal-writer-thread.md, "Writes beside the writer thread"): a
 * write on a connection of its own (an SSH recording's start or finish, a kept request's keep, a purge batch) while
 * the journal's writer thread commits large batches back to back. Such a write meets the write lock the thread holds
 * and waits in SQLite's busy handler, which sleeps on the loop. Timed here: each side write on the loop, and the
 * loop's largest gap (a 1 ms ticker), with the side writes and without them, under the same load.
 *
 * The broker's stores write them through the writer thread (Journal.writeBeside); `--own-connections` opens the
 * stores without the journal, so they write on their own connections as before that change.
 *
 *   node --import tsx bench/writer-lock-stall.ts [seconds per phase, default 5] [--own-connections]
 */
import { performance } from 'node:perf_hooks';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { ResultStore, RequestStore, recordingIdOf } from '../broker/journal/index.js';
import { resultPurgeBatch } from '../broker/host/result-purge.js';
import { dispatchers, phase, printPhase, type Recorder } from './journal-load.js';

const seconds = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 5);
const ownConnections = process.argv.includes('--own-connections');

/**
 * Times a write: the loop's share (until the call returns; with `loopUntilSettled`, until its promise settles) and until
 * it is written (its promise settles). Settles once timed.
 */
function timed(what: string, record: Recorder, write: () => Promise<unknown>, loopUntilSettled = false): Promise<void> {
  const t0 = performance.now();
  const written = write();
  if (!loopUntilSettled) record(`${what}, on the loop`, performance.now() - t0);
  const settled = (outcome: string) => (): void => {
    const ms = performance.now() - t0;
    if (loopUntilSettled) record(`${what}, on the loop (until settled)`, ms);
    record(`${what}, ${outcome}`, ms);
  };
  return written.then(settled('until written'), settled('failed'));
}

async function main(): Promise<void> {
  const temp = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
  const beside = ownConnections ? undefined : temp.journal;
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), {
    role: 'broker',
    ...(beside === undefined ? {} : { journal: beside }),
  });
  const requests = RequestStore.open(temp.path, process.platform, beside);
  const cast = Buffer.alloc(4096, 0x61);
  const sealed = new Uint8Array(2048).fill(7);
  try {
    await phase('warm-up', temp.journal, seconds, undefined);
    const phases = [
      await phase('load alone', temp.journal, seconds, undefined),
      await phase('load + side writes', temp.journal, seconds, (i, record) => {
        const actionId = `act_side${String(i).padStart(8, '0')}`;
        const recordingId = recordingIdOf(actionId);
        const nowMs = temp.clock.nowMs();
        void timed('recording start', record, () => results.recordings.start(actionId, nowMs));
        void timed('recording finish', record, () => results.recordings.finish(recordingId, cast, false, nowMs));
        void timed('kept request keep', record, () =>
          requests.keep({
            action_id: actionId,
            route: 'docs',
            sealed,
            kept_at_ms: nowMs,
            expires_at_ms: nowMs + 60_000,
          }),
        );
        // Every 20 ms, on a turn of its own (5 ms later: not right after the start above waited for the lock), a purge
        // batch as the hourly sweep runs one: the recordings finished so far (retention 0), then, once it is done (as
        // the sweep awaits it), the kept requests (expired by a later clock), bounded as the sweep bounds them. On its
        // own connection all of a purge runs on the loop, the recordings' part after the call returned (it awaits the
        // results' part first): timed until it settles, nothing else running meanwhile but microtasks.
        if (i % 2 === 0)
          setTimeout(() => {
            void timed(
              'purge batch',
              record,
              () => results.purgeExpired(nowMs, 0, resultPurgeBatch),
              ownConnections,
            ).then(() =>
              timed('expired requests drop', record, () => requests.dropExpired(nowMs + 120_000, resultPurgeBatch)),
            );
          }, 5);
      }),
    ];
    const stats = temp.journal.stats();
    console.log(
      `writer thread: ${JSON.stringify(stats.writer_thread)}; ${seconds} s per phase, ${dispatchers} callers`,
    );
    for (const p of phases) printPhase(p, seconds, 1);
  } finally {
    requests.close();
    results.close();
    await temp.dispose();
  }
}

void main();
