/**
 * The load bench/writer-lock-stall.ts and bench/reads-probe.ts put on a journal whose writer thread commits large
 * batches back to back, and how they time what runs beside it: 128 callers driving every action path one append at a
 * time (batches of ~100 events), a 1 ms ticker for the loop's gaps, and a timed call every `everyMs`.
 */
import { performance } from 'node:perf_hooks';
import { actionPathNames, actionPaths } from '../broker/testing/action-paths.js';
import type { Journal } from '../broker/journal/index.js';

export const dispatchers = 128;

export interface Phase {
  readonly name: string;
  readonly events: number;
  readonly gapsMs: number[];
  /** Each timed thing's samples, by what it is. */
  readonly timesMs: Record<string, number[]>;
}

export type Recorder = (what: string, ms: number) => void;

export function pct(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** `dispatchers` callers driving every action path one append at a time, until `stop`; answers the events appended. */
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

/** One phase of `seconds` under the load; `beside(i, record)` runs every `everyMs` (the i-th time) when given. */
export async function phase(
  name: string,
  journal: Journal,
  seconds: number,
  beside: ((i: number, record: Recorder) => void) | undefined,
  everyMs = 10,
): Promise<Phase> {
  const until = performance.now() + seconds * 1000;
  const gapsMs: number[] = [];
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    gapsMs.push(now - last);
    last = now;
  }, 1);
  const timesMs: Record<string, number[]> = {};
  const record: Recorder = (what, ms) => (timesMs[what] ??= []).push(ms);
  let i = 0;
  const side = beside === undefined ? undefined : setInterval(() => beside((i += 1), record), everyMs);
  const events = await load(journal, () => performance.now() >= until);
  clearInterval(ticker);
  if (side !== undefined) clearInterval(side);
  return { name, events, gapsMs, timesMs };
}

/** The phase's rate, the loop's gaps, and each timed thing's percentiles (`overMs`: also counted past it). */
export function printPhase(p: Phase, seconds: number, overMs?: number): void {
  const over = (ms: number): number => p.gapsMs.filter((g) => g > ms).length;
  console.log(
    `${p.name}: ${Math.round(p.events / seconds)} events/s; loop gap p50 ${pct(p.gapsMs, 50).toFixed(2)} p99 ${pct(p.gapsMs, 99).toFixed(2)} max ${Math.max(...p.gapsMs).toFixed(2)} ms; gaps > 5 ms: ${over(5)}, > 10 ms: ${over(10)}, > 20 ms: ${over(20)}`,
  );
  for (const [what, ms] of Object.entries(p.timesMs))
    console.log(
      `  ${what}: n ${ms.length}, p50 ${pct(ms, 50).toFixed(3)} p90 ${pct(ms, 90).toFixed(3)} p99 ${pct(ms, 99).toFixed(3)} max ${Math.max(...ms).toFixed(3)} ms${overMs === undefined ? '' : `; > ${overMs} ms: ${ms.filter((m) => m > overMs).length}`}`,
    );
}
