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
import { actionPathNames, actionPaths } from '../broker/testing/action-paths.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { type Journal } from '../broker/journal/index.js';

const seconds = Math.min(5, Number(process.argv[2] ?? 4));
const dispatchers = 128;

interface Phase {
  readonly name: string;
  readonly events: number;
  readonly gapsMs: number[];
  readonly readsMs: Record<string, number[]>;
}

function pct(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** `dispatchers` callers driving every action path one append at a time, until `stop`. */
async function load(journal: Journal, stop: () => boolean): Promise<number> {
  let events = 0;
  let n = 0;
  const run = async (d: number): Promise<void> => {
    while (!stop()) {
      const name = actionPathNames[n % actionPathNames.length] as (typeof actionPathNames)[number];
      const id = `act_l${String(d).padStart(4, '0')}n${String((n += 1)).padStart(8, '0')}`;
      for (const event of actionPaths[name](id)) {
        await journal.append(event).catch(() => undefined);
        events += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: dispatchers }, (_, d) => run(d)));
  return events;
}

type Recorder = (what: string, ms: number) => void;

async function phase(name: string, journal: Journal, reads: ((record: Recorder) => void) | undefined): Promise<Phase> {
  const until = performance.now() + seconds * 1000;
  const gapsMs: number[] = [];
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    gapsMs.push(now - last);
    last = now;
  }, 1);
  const readsMs: Record<string, number[]> = {};
  const record: Recorder = (what, ms) => (readsMs[what] ??= []).push(ms);
  const reader = reads === undefined ? undefined : setInterval(() => reads(record), 10);
  const events = await load(journal, () => performance.now() >= until);
  clearInterval(ticker);
  if (reader !== undefined) clearInterval(reader);
  return { name, events, gapsMs, readsMs };
}

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
    await phase('warm-up', journal, undefined);
    const phases = [
      await phase('load alone', journal, undefined),
      await phase('load + synchronous reads', journal, (record) => {
        syncRead('eventsPage(1, 50)', record, () => journal.eventsPage(1, 50));
        syncRead('listActions 50', record, () => journal.listActions({ limit: 50 }));
      }),
      await phase('load + readCurrent reads', journal, (record) => {
        currentRead(journal, 'eventsPage(1, 50)', record, () => journal.eventsPage(1, 50));
        currentRead(journal, 'listActions 50', record, () => journal.listActions({ limit: 50 }));
      }),
    ];
    for (const p of phases) {
      const over = (ms: number): number => p.gapsMs.filter((g) => g > ms).length;
      console.log(
        `${p.name}: ${Math.round(p.events / seconds)} events/s; loop gap p50 ${pct(p.gapsMs, 50).toFixed(2)} p99 ${pct(p.gapsMs, 99).toFixed(2)} max ${Math.max(...p.gapsMs).toFixed(2)} ms; > 10 ms: ${over(10)}, > 20 ms: ${over(20)}`,
      );
      for (const [what, ms] of Object.entries(p.readsMs))
        console.log(
          `  ${what}: n ${ms.length}, p50 ${pct(ms, 50).toFixed(3)} p90 ${pct(ms, 90).toFixed(3)} p99 ${pct(ms, 99).toFixed(3)} max ${Math.max(...ms).toFixed(3)} ms`,
        );
    }
  } finally {
    await temp.dispose();
  }
}

void main();
