/**
 * Journal benchmark: durable appends per second with group commit vs one commit per append, for
 * 1, 16 and 64 concurrent dispatchers, plus the raw fsync latency of the data directory's disk.
 *
 *   node --import tsx bench/journal.ts [parent dir for the temp data dirs]
 *
 * Not part of the test run. Every phase is bounded in time and count (about 30 s in total).
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';

const dispatcherCounts = [1, 16, 64] as const;
const runMsMax = 2_500;
/** The first run pays for JIT and cold caches; it is run once and not reported. */
const warmupMsMax = 1_000;
const appendsMax = 60_000;
const fsyncMsMax = 3_000;
const fsyncSamplesMax = 2_000;
const fsyncWriteBytes = 4_096;

const parentDir = process.argv[2] ?? tmpdir();

interface RunResult {
  mode: string;
  dispatchers: number;
  appends: number;
  seconds: number;
  commits: number;
  latenciesMs: number[];
}

async function runAppends(groupCommit: boolean, dispatchers: number, runMs = runMsMax): Promise<RunResult> {
  const dir = mkdtempSync(join(parentDir, 'postern-bench-'));
  const journal = await Journal.open({ dataDir: dir, clock: systemClock, groupCommit });
  const latenciesMs: number[] = [];
  const started = performance.now();
  const deadline = started + runMs;
  let appends = 0;

  // Each dispatcher drives whole actions, awaiting every append as the real dispatcher would.
  async function dispatcher(d: number): Promise<void> {
    for (let n = 0; performance.now() < deadline && appends < appendsMax; n += 1) {
      const id = `act_bench_${d}_${n}`;
      for (const event of actionPaths.httpNoApproval(id)) {
        const t0 = performance.now();
        if (event.kind === 'DISPATCH_STARTED') await journal.beginDispatch(id, event.payload.attempt, event.payload);
        else await journal.append(event);
        latenciesMs.push(performance.now() - t0);
        appends += 1;
      }
    }
  }

  await Promise.all(Array.from({ length: dispatchers }, (_, d) => dispatcher(d)));
  const seconds = (performance.now() - started) / 1000;
  const { commits } = journal.stats();
  await journal.close();
  rmSync(dir, { recursive: true, force: true });
  return {
    mode: groupCommit ? 'group commit' : 'commit per append',
    dispatchers,
    appends,
    seconds,
    commits,
    latenciesMs,
  };
}

function rawFsync(): { samples: number; p50: number; p99: number } {
  const dir = mkdtempSync(join(parentDir, 'postern-fsync-'));
  const fd = openSync(join(dir, 'probe'), 'w');
  const block = Buffer.alloc(fsyncWriteBytes, 0x5a);
  const latencies: number[] = [];
  const deadline = performance.now() + fsyncMsMax;
  try {
    while (latencies.length < fsyncSamplesMax && performance.now() < deadline) {
      const t0 = performance.now();
      writeSync(fd, block);
      fsyncSync(fd);
      latencies.push(performance.now() - t0);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return { samples: latencies.length, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

/** The mount holding the data directory (Linux only; best effort). */
function mountOf(path: string): string {
  try {
    const mounts = readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f.length > 2 && path.startsWith(f[1] ?? '\0'))
      .sort((a, b) => (b[1]?.length ?? 0) - (a[1]?.length ?? 0));
    const best = mounts[0];
    return best === undefined ? 'unknown' : `${best[0]} on ${best[1]} (${best[2]})`;
  } catch {
    return 'unknown';
  }
}

function pad(value: string | number, width: number): string {
  return String(value).padStart(width);
}

async function main(): Promise<void> {
  console.log(
    `node ${process.version}, ${process.platform}/${process.arch}, ${availableParallelism()} CPUs: ${cpus()[0]?.model ?? 'unknown'}`,
  );
  console.log(`data dir parent: ${parentDir}, mount: ${mountOf(parentDir)}`);
  console.log('');

  const fsync = rawFsync();
  console.log(
    `raw fsync (${fsyncWriteBytes} B write + fsync, ${fsync.samples} samples): p50 ${fsync.p50.toFixed(3)} ms, p99 ${fsync.p99.toFixed(3)} ms`,
  );
  console.log('');

  await runAppends(true, 16, warmupMsMax);
  console.log(
    `${pad('mode', 18)} ${pad('dispatchers', 11)} ${pad('appends', 8)} ${pad('appends/s', 10)} ${pad('commits', 8)} ${pad('events/commit', 13)} ${pad('p50 ms', 8)} ${pad('p99 ms', 8)}`,
  );
  for (const groupCommit of [true, false]) {
    for (const dispatchers of dispatcherCounts) {
      const r = await runAppends(groupCommit, dispatchers);
      console.log(
        [
          pad(r.mode, 18),
          pad(r.dispatchers, 11),
          pad(r.appends, 8),
          pad(Math.round(r.appends / r.seconds), 10),
          pad(r.commits, 8),
          pad((r.appends / Math.max(1, r.commits)).toFixed(1), 13),
          pad(percentile(r.latenciesMs, 0.5).toFixed(3), 8),
          pad(percentile(r.latenciesMs, 0.99).toFixed(3), 8),
        ].join(' '),
      );
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
