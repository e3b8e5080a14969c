/**
 * Audit benchmark: what encryption + Merkle hashing cost per event, durable append throughput with
 * them (group commit, 64 concurrent appenders), `audit verify` speed on generated journals of 100k
 * and 1M events (the serial steps on this thread, one worker thread, a worker per core), and a real
 * daemon holding the 1M journal: its RSS before and after an `audit.verify`, and how long `status`
 * calls sent during that verify waited.
 *
 *   node --import tsx bench/audit.ts [--events N (default 1000000)] [--dir DIR] [--skip-append]
 *
 * --dir keeps the generated journals in DIR and reuses them on the next run. Not part of the test
 * run. Bounded: each timed phase stops at its time or count limit; the generator writes in big
 * transactions with synchronous=OFF (broker/testing/bulk-audit-journal.ts: a fixture whose rows, tree
 * and checkpoints are exactly what the journal writes). Events per CPU-second (all threads) is the
 * figure a loaded machine distorts least; events/s is wall time.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import sodium from 'libsodium-wrappers-sumo';
import { verifyJournal, type VerifyOptions } from '../broker/audit/verify-journal.js';
import type { BrokerApi, BrokerApiMethod, NewEvent } from '../broker/contract/index.js';
import {
  appendLeaf,
  auditHeaderText,
  emptyFrontier,
  encodeAssociatedData,
  encodeLeaf,
  eventOutcomeHeader,
  leafHash,
} from '../broker/core/index.js';
import { controlSocketPath, sendControlRequest } from '../broker/host/control-client.js';
import { encryptPayload, newRunKey, NoncePool, sha256 } from '../broker/journal/event-cipher.js';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { writeBulkAuditJournal } from '../broker/testing/bulk-audit-journal.js';
import { createMemoryVault } from '../broker/testing/memory-vault.js';
import { anchorsInScratch } from './anchor-dir.js';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' },
    dir: { type: 'string' },
    'skip-append': { type: 'boolean' },
  },
});
const bigEvents = Number(args.events);
const smallEvents = Math.min(100_000, bigEvents);
const sealMsMax = 3_000;
const sealEventsMax = 500_000;
const appendMsMax = 5_000;
const appendEventsMax = 200_000;
const appenders = 64;
/** Gap between `status` probes sent to the daemon while it verifies. */
const probeEveryMs = 20;
/** Bound on the daemon's start. */
const daemonStartMsMax = 60_000;

/** A realistic event mix: every kind of the approved HTTP path, ~200–400 bytes of JSON each. */
const script = actionPaths.httpApproved('act_bench_000000');
function eventFor(i: number): NewEvent {
  const base = script[i % script.length] as NewEvent;
  return { ...base, action_id: `act_bench_${String(Math.floor(i / script.length)).padStart(6, '0')}` };
}

function rate(n: number, ms: number): string {
  return `${Math.round((n / ms) * 1000).toLocaleString('en-US')}`;
}

/** Phase 1: seal + leaf hash + frontier append, no SQLite: the crypto cost per event. */
function benchSeal(): { events: number; ms: number } {
  const key = newRunKey();
  const nonces = new NoncePool();
  let frontier = emptyFrontier;
  const start = performance.now();
  let n = 0;
  while (n < sealEventsMax && performance.now() - start < sealMsMax) {
    const e = eventFor(n);
    const header = Buffer.from(
      auditHeaderText({
        at_ms: 1,
        action_id: e.action_id,
        session_id: 'ses_bench',
        ticket: n,
        lane: 'lane-a',
        kind: e.kind,
        run: 1,
        outcome: eventOutcomeHeader(e),
      }),
      'utf8',
    );
    const nonce = nonces.next();
    const ct = encryptPayload(
      key,
      nonce,
      encodeAssociatedData(n + 1, header),
      Buffer.from(JSON.stringify({ payload: e.payload }), 'utf8'),
    );
    frontier = appendLeaf(sha256, frontier, leafHash(sha256, encodeLeaf(n + 1, header, nonce, ct)));
    n += 1;
  }
  return { events: n, ms: performance.now() - start };
}

/** Phase 2: durable appends through the real journal (group commit, vault unlocked, checkpoints on). */
async function benchAppend(): Promise<{ events: number; ms: number; commits: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'postern-bench-audit-append-'));
  try {
    const journal = await Journal.open({ dataDir: dir, clock: systemClock, vault: await createMemoryVault() });
    let next = 0;
    const start = performance.now();
    const worker = async (): Promise<void> => {
      while (next < appendEventsMax && performance.now() - start < appendMsMax) {
        const first = next;
        next += script.length;
        // One action's whole path as one unit: every event valid for the projection.
        await journal.appendBatch(Array.from({ length: script.length }, (_, k) => eventFor(first + k)));
      }
    };
    await Promise.all(Array.from({ length: appenders }, worker));
    const ms = performance.now() - start;
    const { events, commits } = journal.stats();
    await journal.close();
    return { events, ms, commits };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface VerifyRun {
  readonly label: string;
  readonly events: number;
  readonly ms: number;
  readonly cpuMs: number;
}

/** One verify of `dbPath`, wall time and CPU time of every thread of this process. */
async function timedVerify(dbPath: string, label: string, options: Partial<VerifyOptions>): Promise<VerifyRun> {
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  let mode = '';
  const report = await verifyJournal({ dbPath, ...options, onMode: (m) => (mode = m) });
  const ms = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  if (!report.ok) throw new Error(`the generated journal failed to verify: ${report.code} ${report.message}`);
  const expected = options.threads === 0 ? 'serial' : 'workers';
  if (mode !== expected) throw new Error(`verify ran ${mode}, not ${expected}`);
  return { label, events: report.events, ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** A generated journal of `count` events, kept in --dir across runs. */
async function journalOf(root: string, count: number): Promise<string> {
  const dir = join(root, `journal-${count}`);
  const dbPath = join(dir, 'journal.sqlite');
  if (existsSync(join(dir, 'complete'))) return dbPath;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ms = await writeBulkAuditJournal(dbPath, count);
  // Written last: an interrupted generation is not reused.
  mkdirSync(join(dir, 'complete'));
  console.error(`generated ${count} events in ${(ms / 1000).toFixed(1)} s`);
  return dbPath;
}

function rssMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

interface DaemonRun {
  readonly before: number;
  readonly after: number;
  readonly peak: number;
  readonly verifyMs: number;
  readonly probes: number[];
}

async function callOperator<M extends BrokerApiMethod>(dataDir: string, method: M): Promise<BrokerApi[M]['output']> {
  const reply = await sendControlRequest(controlSocketPath(dataDir), { op: 'api', method, input: {} }, 120_000);
  if (!reply.ok) throw new Error(`${method}: ${reply.error.code} ${reply.error.message}`);
  return reply.value as BrokerApi[M]['output'];
}

/** `postern daemon` on `dataDir`, ready once it printed its operator URL (the control socket is up by then). */
async function startDaemon(dataDir: string): Promise<{ pid: number; stop: () => Promise<void> }> {
  const bin = join(import.meta.dirname, '..', 'bin', 'postern.mjs');
  const child = spawn(process.execPath, [bin, 'daemon', '--data-dir', dataDir, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the daemon did not start in time')), daemonStartMsMax);
    void exited.then(() => reject(new Error('the daemon exited before it was ready')));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (!line.startsWith('Operator UI: ')) return;
      clearTimeout(timer);
      resolve();
    });
  });
  try {
    await ready;
  } catch (error) {
    await stop();
    throw error;
  }
  return { pid: child.pid as number, stop };
}

/** A real daemon on a copy of the big journal: RSS before and after one audit.verify, and `status` latency during it. */
async function daemonRun(bigPath: string, root: string): Promise<DaemonRun> {
  const dataDir = join(root, 'daemon');
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { mode: 0o700 });
  copyFileSync(bigPath, join(dataDir, 'journal.sqlite'));
  const daemon = await startDaemon(dataDir);
  try {
    await callOperator(dataDir, 'status');
    const before = rssMiB(daemon.pid).rss;
    const probes: number[] = [];
    let done = false;
    const start = performance.now();
    const verify = callOperator(dataDir, 'audit.verify').finally(() => (done = true));
    while (!done) {
      const t0 = performance.now();
      await callOperator(dataDir, 'status');
      if (!done) probes.push(performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, probeEveryMs));
    }
    const result = await verify;
    const verifyMs = performance.now() - start;
    if (!result.ok) throw new Error(`the daemon's verify failed: ${result.code}`);
    const after = rssMiB(daemon.pid);
    return { before, after: after.rss, peak: after.peak, verifyMs, probes };
  } finally {
    await daemon.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  await sodium.ready;
  const cores = availableParallelism();
  console.log(
    `# audit bench — ${cores} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} at start`,
  );
  const root = args.dir ?? mkdtempSync(join(tmpdir(), 'postern-bench-audit-'));
  anchorsInScratch(root);
  try {
    const seal = benchSeal();
    const append = args['skip-append'] === true ? undefined : await benchAppend();
    const runs: VerifyRun[] = [];
    for (const count of [...new Set([smallEvents, bigEvents])]) {
      const dbPath = await journalOf(root, count);
      runs.push(await timedVerify(dbPath, 'serial steps, this thread (the exact-failure path)', { threads: 0 }));
      runs.push(await timedVerify(dbPath, '1 worker thread', { threads: 1, parallelRowsMin: 0 }));
      runs.push(await timedVerify(dbPath, `${cores} worker threads`, { threads: cores, parallelRowsMin: 0 }));
    }
    const bigPath = await journalOf(root, bigEvents);
    const daemon = await daemonRun(bigPath, root);
    console.log('| phase | events | time | events/s | events per CPU-s |');
    console.log('| --- | ---: | ---: | ---: | ---: |');
    console.log(
      `| seal + hash only (XChaCha20-Poly1305, SHA-256 leaf + frontier; no SQLite) | ${seal.events} | ${(seal.ms / 1000).toFixed(2)} s | ${rate(seal.events, seal.ms)} | |`,
    );
    if (append !== undefined)
      console.log(
        `| durable appends through the journal (${appenders} appenders, ${script.length}-event units, group commit, checkpoints every 1000) | ${append.events} | ${(append.ms / 1000).toFixed(2)} s | ${rate(append.events, append.ms)} (${append.commits} commits) | |`,
      );
    for (const r of runs)
      console.log(
        `| audit verify, ${r.label} | ${r.events} | ${(r.ms / 1000).toFixed(2)} s | ${rate(r.events, r.ms)} | ${rate(r.events, r.cpuMs)} |`,
      );
    const probes = [...daemon.probes].sort((a, b) => a - b);
    console.log(`\n| daemon with a ${bigEvents}-event journal | value |`);
    console.log('| --- | ---: |');
    console.log(`| RSS before audit.verify | ${daemon.before.toFixed(0)} MiB |`);
    console.log(`| RSS after audit.verify | ${daemon.after.toFixed(0)} MiB |`);
    console.log(`| peak RSS (VmHWM, whole run) | ${daemon.peak.toFixed(0)} MiB |`);
    console.log(`| audit.verify, as the operator API answered it | ${(daemon.verifyMs / 1000).toFixed(2)} s |`);
    console.log(
      `| status calls during the verify: count, p50, p99, max | ${probes.length}, ${quantile(probes, 0.5).toFixed(1)} ms, ${quantile(probes, 0.99).toFixed(1)} ms, ${(probes.at(-1) ?? Number.NaN).toFixed(1)} ms |`,
    );
    console.log(
      `\njournal file: ${(statSync(bigPath).size / 2 ** 20).toFixed(0)} MiB for ${bigEvents} events; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at the end`,
    );
  } finally {
    if (args.dir === undefined) rmSync(root, { recursive: true, force: true });
  }
}

await main();
