/**
 * What the durable-path benches share: the machine line, the raw fsync latency of a directory's disk,
 * a bounded closed-loop driver and percentiles. Kept apart from the drivers so the executor child
 * (durable-executor.ts) and the orchestrator (durable.ts) measure and print the same way.
 */
import { closeSync, fsyncSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const fsyncProbeMsMax = 2_000;
const fsyncProbeSamplesMax = 1_000;
const fsyncProbeBytes = 4_096;

export interface Summary {
  count: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p95: number;
  p99: number;
  /** drive(): the share of the run the driving process's event loop was busy (eventLoopUtilization), 0–1. */
  loopBusy?: number;
  /**
   * drive(): per operation, ms: the driving process's event loop busy time (wall time not idle, so it includes time the
   * host did not run the process) and the whole process's CPU time (process.cpuUsage, user + system, every thread: the
   * loop, a writer thread, libuv's pool). Less at the mercy of the host's speed between runs than a rate, so a
   * change's cost or gain shows beside it.
   */
  loopMsPerOp?: number;
  cpuMsPerOp?: number;
}

export function summarize(latenciesMs: readonly number[], seconds: number): Summary {
  return {
    count: latenciesMs.length,
    seconds,
    perSecond: latenciesMs.length / seconds,
    p50: percentile(latenciesMs, 50),
    p95: percentile(latenciesMs, 95),
    p99: percentile(latenciesMs, 99),
  };
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** Runs `op` from `concurrency` workers, each awaiting its own call, until `runMs` or `opsMax` calls. */
export async function drive(
  op: () => Promise<unknown>,
  concurrency: number,
  bounds: { runMs: number; opsMax: number },
): Promise<Summary> {
  const latenciesMs: number[] = [];
  const started = performance.now();
  const loopBefore = performance.eventLoopUtilization();
  const cpuBefore = process.cpuUsage();
  let issued = 0;
  const worker = async (): Promise<void> => {
    while (issued < bounds.opsMax && performance.now() - started < bounds.runMs) {
      issued += 1;
      const t0 = performance.now();
      await op();
      latenciesMs.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const loop = performance.eventLoopUtilization(loopBefore);
  const cpu = process.cpuUsage(cpuBefore);
  const count = Math.max(1, latenciesMs.length);
  return {
    ...summarize(latenciesMs, (performance.now() - started) / 1000),
    loopBusy: loop.utilization,
    loopMsPerOp: loop.active / count,
    cpuMsPerOp: (cpu.user + cpu.system) / 1000 / count,
  };
}

/** 4 KiB write + fsync in `dir`, the way a commit hits the disk, bounded in count and time. */
export function rawFsyncMs(dir: string): Summary {
  const file = join(dir, 'fsync-probe');
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(fsyncProbeBytes, 0x5a);
  const samples: number[] = [];
  const started = performance.now();
  try {
    while (samples.length < fsyncProbeSamplesMax && performance.now() - started < fsyncProbeMsMax) {
      const t0 = performance.now();
      writeSync(fd, block);
      fsyncSync(fd);
      samples.push(performance.now() - t0);
    }
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
  return summarize(samples, (performance.now() - started) / 1000);
}

/** CPU model, vCPUs, the disk holding `dataDir`, Node and the load average: what a number depends on. */
export function machineLine(dataDir: string): string {
  const load = loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  return (
    `machine: ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${availableParallelism()} vCPU, ` +
    `disk ${diskOf(dataDir)}, Node ${process.version}, load average ${load}`
  );
}

/** The mounted device holding `path` (Linux /proc/mounts, longest mount point that prefixes it). */
export function diskOf(path: string): string {
  try {
    const best = readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f.length > 2 && (path === f[1] || path.startsWith(f[1] === '/' ? '/' : `${f[1]}/`)))
      .sort((a, b) => (b[1]?.length ?? 0) - (a[1]?.length ?? 0))[0];
    return best === undefined ? 'unknown' : `${best[0]} (${best[2]} on ${best[1]})`;
  } catch {
    return 'unknown (no /proc/mounts)';
  }
}

export function ms(value: number): string {
  return Number.isNaN(value) ? '—' : value.toFixed(2);
}

export function perSecond(value: number): string {
  return Number.isNaN(value) ? '—' : Math.round(value).toLocaleString('en-US');
}

export function verdict(pass: boolean): string {
  return pass ? 'PASS' : 'FAIL';
}
