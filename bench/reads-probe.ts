/**
 * Issue 18, "nothing synchronous on the loop" (docs/journal-writer-thread.md, "Reads that wait without the loop"): a
 * read that must see everything queued (an operator's Activity page, status, an agent's decision) while the journal's
 * writer thread commits large batches back to back. The synchronous read (`requireCurrent`) drains the thread on the
 * loop's turn (Atomics.wait) and commits what is queued before it reads; `Journal.readCurrent` awaits the same units
 * and then reads in one read transaction. Timed here, under the same load (128 callers driving every action path
 * through a journal whose every batch goes to the thread): the loop's largest gaps (a 1 ms ticker), the load's
 * events/s, and each read's share of the loop (the call, and for readCurrent its read when it runs) and its time until
 * answered — one `eventsPage(1, 50)` and one `listActions({ limit: 50 })` every 10 ms.
 *
 *   node --import tsx bench/reads-probe.ts [seconds per phase, default 4, at most 5]
 */
import { performance } from 'node:perf_hooks';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { type Journal } from '../broker/journal/index.js';
import { phase, printPhase, type Recorder } from './journal-load.js';

const seconds = Math.min(5, Number(process.argv[2] ?? 4));

/** A synchronous read: all of it on the loop. */
function syncRead(what: string, record: Recorder, read: () => unknown): void {
  const t0 = performance.now();
  read();
  record(`${what}, on the loop`, performance.now() - t0);
}

/** readCurrent: the call and the read are on the loop; the wait between them is not. */
function currentRead(journal: Journal, what: string, record: Recorder, read: () => unknown): void {
  const t0 = performance.now();
  let readMs = 0;
  const answered = journal.readCurrent(() => {
    const t1 = performance.now();
    const value = read();
    readMs = performance.now() - t1;
    return value;
  });
  const callMs = performance.now() - t0;
  answered.then(
    () => {
      record(`${what}, on the loop`, callMs + readMs);
      record(`${what}, until answered`, performance.now() - t0);
    },
    () => record(`${what}, failed`, performance.now() - t0),
  );
}

async function main(): Promise<void> {
  const temp = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
  const journal = temp.journal;
  try {
    await phase('warm-up', journal, seconds, undefined);
    const phases = [
      await phase('load alone', journal, seconds, undefined),
      await phase('load + synchronous reads', journal, seconds, (_i, record) => {
        syncRead('eventsPage(1, 50)', record, () => journal.eventsPage(1, 50));
        syncRead('listActions 50', record, () => journal.listActions({ limit: 50 }));
      }),
      await phase('load + readCurrent reads', journal, seconds, (_i, record) => {
        currentRead(journal, 'eventsPage(1, 50)', record, () => journal.eventsPage(1, 50));
        currentRead(journal, 'listActions 50', record, () => journal.listActions({ limit: 50 }));
      }),
    ];
    for (const p of phases) printPhase(p, seconds);
  } finally {
    await temp.dispose();
  }
}

void main();
