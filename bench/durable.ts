/**
 * The durable path at the disk's limit (issue 18): the tables its goals are judged by, each run with
 * the machine and the raw fsync latency of the data directory's disk measured in the same run.
 *
 *  1. added p50/p95 at concurrency 1 for an auto-approved POST, via the executor and via MCP (a real
 *     MCP SDK client, `postern mcp`, a real daemon), over undici straight to the same loopback server;
 *     goal: added p50 <= 2 x fsync p50 + 0.5 ms; with the floor under it (bench/sync-floor.ts): two WAL syncs as the
 *     loop waits for them, measured alone;
 *  2. concurrency 64: durable actions/s against the journal's own event ceiling for the same event mix
 *     (group commit, same run); goal >= 2,000 actions/s and >= 80 % of the ceiling;
 *  3. a remote answering after 20 ms, concurrency 16: broker throughput against direct; goal >= 0.9 x;
 *  4. fsyncs per action observed by strace on the broker side (every thread, so libuv's threadpool and
 *     worker threads count too; never the journal's commit counter), on and off the event loop;
 *  5. CLI and shim cold start (bench/cli-start.ts); goal < 300 ms to first output;
 *  6. where one action's time goes, phase by phase, at concurrency 1 and against the 20 ms remote at concurrency 16
 *     (bench/durable-phases.ts: the executor's appends timed in runs of their own).
 *
 * The target servers run here; the executor runs in its own process (bench/durable-executor.ts) and
 * the daemon in its own, so neither shares an event loop with the remote it calls. Latency and
 * throughput runs are never traced; the strace counts come from separate, shorter runs.
 *
 *   npm run bench:durable            (node --import tsx bench/durable.ts [--no-cli-start] [--from-sources])
 *
 * The executor runs as the product ships: bench/durable-executor.ts is bundled first with the options of the CLI's
 * bundle (scripts/build-cli.mjs nodeBundleOptions) into dist/bench/ and run by plain node, and the CLI bundle is
 * rebuilt (dist/cli, `npm run build:cli`) so the MCP row's daemon and shim run it too. `--from-sources` runs the
 * executor through tsx instead (keepNames wraps every closure created at run time; ~10–20 % slower here) and
 * leaves dist/cli as it is, for comparison.
 *
 * Not part of the test run. Every phase is bounded in count and time; about 2–3 minutes in total.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { buildCli, nodeBundleOptions } from '../scripts/build-cli.mjs';
import type { ExecutorReply, ExecutorRequest } from './durable-executor.js';
import { startMcpRig } from './durable-daemon.js';
import { drive, machineLine, ms, percentile, perSecond, rawFsyncMs, verdict, type Summary } from './durable-measure.js';
import type { Handoff } from './writer-handoff.js';
import type { CommitPages } from './commit-pages.js';
import { FsyncTrace, straceUnavailable, tracedArgv, type SyncCount } from './fsync-trace.js';
import { measureSyncFloor, syncFloorLine, syncFloorTable, type SyncFloor } from './sync-floor.js';

const remoteDelayMs = 20;
const replyWaitMs = 120_000;
/**
 * The timed rows measure the broker as it runs for hours: after a warm-up long enough for V8 to have compiled its hot
 * paths. On this project's 2-vCPU VM a 1 s warm-up left the compiler working on the second vCPU through every row (V8's
 * worker threads 0.6–0.9 ms of CPU an action at c1, 0.16 after 20 s), which the c1 and c64 rows paid for twice:
 * docs/benchmarks.md, 2026-12-06 11:45. The traced rows count syncs, which the compiler does not change.
 */
const bounds = {
  warmup: { runMs: 15_000, opsMax: 100_000 },
  /**
   * The shorter warm-ups: undici alone (the direct rows), and the broker on answers with id headers, whose scrubbing
   * takes decoding paths the loopback target's answers do not.
   */
  warmupShort: { runMs: 3_000, opsMax: 20_000 },
  tracedWarmup: { runMs: 1_000, opsMax: 500 },
  c1: { runMs: 3_000, opsMax: 2_000 },
  c64: { runMs: 4_000, opsMax: 40_000 },
  ceiling: { runMs: 3_000 },
  remote: { runMs: 3_000, opsMax: 20_000 },
  tracedC1: { runMs: 3_000, opsMax: 200 },
  tracedC64: { runMs: 3_000, opsMax: 2_000 },
  tracedRemote: { runMs: 3_000, opsMax: 2_000 },
  phases: { runMs: 2_000, opsMax: 2_000 },
};
const cliStartRuns = 5;
/** One c64 group commit's worth of actions, handed to a worker as one batch (table 7). */
const handoffBatchActions = 64;
/** Actions run one at a time for table 8 (their commits' pages). */
const pagesActions = 20;

/**
 * The header values a cloud API typically answers with besides content-type and length (a request id, an etag, a
 * W3C traceparent, an S3-style base64 id), fixed for every answer: each is a run the secret scrubber decodes and tries
 * as compressed data (bench/scrub.ts times that alone). Table 3's second pair of rows answers with them.
 */
const idHeaders: Readonly<Record<string, string>> = {
  'x-request-id': '3f0c9a7e-52d1-4b8e-9c61-0d7f2a4be915',
  etag: '"9b2e4f61c07d3a58e1f6b0c2d4a79e83"',
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  'x-amz-id-2': 'Yk3pQ9wR2tV7xZ1aC4eG6iK8mO0qS2uW4yA6cE8gI0kM2oQ4sU6wY8aC0eG2iK4mO6qS8uW0yA2cE4gI6kM8oQ=',
};

async function listen(
  delayMs: number,
  headers: Readonly<Record<string, string>> = {},
): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end('{"ok":true}');
      };
      if (delayMs === 0) answer();
      else setTimeout(answer, delayMs);
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

const executorSource = path.join(import.meta.dirname, 'durable-executor.ts');

/**
 * The node argv that runs the executor: its bundle, compiled like the shipped CLI (built once per bench run), or
 * with --from-sources its TypeScript through tsx.
 */
let executorArgv: Promise<string[]> | undefined;
function executorCommand(): Promise<string[]> {
  executorArgv ??= (async () => {
    if (process.argv.includes('--from-sources')) return ['--import', 'tsx', executorSource];
    // The MCP row's daemon and shim run bin/postern.mjs, which takes the CLI bundle only while it is current.
    await buildCli();
    const outfile = path.join(import.meta.dirname, '..', 'dist', 'bench', 'durable-executor.mjs');
    await build({ ...nodeBundleOptions, entryPoints: [executorSource], outfile, logLevel: 'warning' });
    return [outfile];
  })();
  return executorArgv;
}

/** The executor child, one request at a time over IPC; under strace when `traceFile` is given. */
class Executor {
  private constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
  ) {}

  static async start(traceFile?: string): Promise<Executor> {
    const argv = [process.execPath, ...(await executorCommand())];
    const [command, ...args] = traceFile === undefined ? argv : ['strace', ...tracedArgv(argv, traceFile)];
    const child = spawn(command as string, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const hello = await nextReply(child);
    if (!hello.ok) throw new Error(hello.error);
    return new Executor(child, hello.pid);
  }

  async run(request: ExecutorRequest): Promise<Extract<ExecutorReply, { ok: true }>> {
    this.child.send(request);
    const reply = await nextReply(this.child);
    if (!reply.ok) throw new Error(`executor ${request.op}: ${reply.error}`);
    return reply;
  }

  async stop(): Promise<void> {
    const exited = once(this.child, 'exit');
    await this.run({ op: 'exit' });
    await exited;
  }
}

function nextReply(child: ChildProcess): Promise<ExecutorReply> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no executor reply within ${replyWaitMs} ms`)), replyWaitMs);
    const onExit = (code: number | null): void => reject(new Error(`the executor exited (${code})`));
    child.once('exit', onExit);
    child.once('message', (reply: ExecutorReply) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve(reply);
    });
  });
}

interface Targets {
  fast: string;
  slow: string;
  ids: string;
}

interface Measured {
  directC1: Summary;
  brokerC1: Summary;
  mcpC1: Summary;
  /** Per POST at c1 through MCP, ms of CPU (every thread): the daemon's and the shim's, from /proc. */
  mcpCpu: { daemon: number; shim: number };
  brokerC64: Summary & { eventsPerAction: number };
  ceiling: Summary & { eventsPerAction: number; mix: string };
  directSlow: Summary;
  brokerSlow: Summary;
  directIds: Summary;
  brokerIds: Summary;
  phases: { label: string; phases: NonNullable<Extract<ExecutorReply, { ok: true }>['phases']> }[];
  handoff: Handoff;
  pages: CommitPages;
}

/** The untraced runs: tables 1–3. */
async function measure(targets: Targets): Promise<Measured> {
  const executor = await Executor.start();
  try {
    await executor.run({ op: 'setup', origins: targets });
    await executor.run({ op: 'direct', target: 'fast', concurrency: 8, ...bounds.warmupShort });
    await executor.run({ op: 'broker', target: 'fast', concurrency: 8, ...bounds.warmup });
    await executor.run({ op: 'broker', target: 'ids', concurrency: 16, ...bounds.warmupShort });
    const directC1 = await executor.run({ op: 'direct', target: 'fast', concurrency: 1, ...bounds.c1 });
    const brokerC1 = await executor.run({ op: 'broker', target: 'fast', concurrency: 1, ...bounds.c1 });
    const brokerC64 = await executor.run({ op: 'broker', target: 'fast', concurrency: 64, ...bounds.c64 });
    const ceiling = await executor.run({ op: 'ceiling', concurrency: 64, ...bounds.ceiling });
    const { handoff } = await executor.run({ op: 'handoff', batchActions: handoffBatchActions });
    if (handoff === undefined) throw new Error('the executor answered handoff without it');
    const { pages } = await executor.run({ op: 'pages', target: 'fast', actions: pagesActions });
    if (pages === undefined) throw new Error('the executor answered pages without them');
    const directSlow = await executor.run({ op: 'direct', target: 'slow', concurrency: 16, ...bounds.remote });
    const brokerSlow = await executor.run({ op: 'broker', target: 'slow', concurrency: 16, ...bounds.remote });
    const directIds = await executor.run({ op: 'direct', target: 'ids', concurrency: 16, ...bounds.remote });
    const brokerIds = await executor.run({ op: 'broker', target: 'ids', concurrency: 16, ...bounds.remote });
    const phases: Measured['phases'] = [];
    for (const [label, target, concurrency] of [
      ['c1, loopback', 'fast', 1],
      [`c16, ${remoteDelayMs} ms remote`, 'slow', 16],
    ] as const) {
      const reply = await executor.run({ op: 'phases', target, concurrency, ...bounds.phases });
      if (reply.phases === undefined) throw new Error('the executor answered phases without them');
      phases.push({ label, phases: reply.phases });
    }
    const mcp = await startMcpRig(targets.fast);
    let mcpC1: Summary;
    let mcpCpu: Measured['mcpCpu'];
    try {
      await drive(() => mcp.post(), 8, bounds.warmup);
      const before = mcp.cpuMs();
      mcpC1 = await drive(() => mcp.post(), 1, bounds.c1);
      const after = mcp.cpuMs();
      mcpCpu = {
        daemon: (after.daemon - before.daemon) / mcpC1.count,
        shim: (after.shim - before.shim) / mcpC1.count,
      };
    } finally {
      await mcp.stop();
    }
    return {
      directC1: summaryOf(directC1),
      brokerC1: summaryOf(brokerC1),
      mcpC1,
      mcpCpu,
      brokerC64: { ...summaryOf(brokerC64), eventsPerAction: brokerC64.eventsPerAction ?? Number.NaN },
      ceiling: {
        ...summaryOf(ceiling),
        eventsPerAction: ceiling.eventsPerAction ?? Number.NaN,
        mix: ceiling.mix ?? '',
      },
      directSlow: summaryOf(directSlow),
      brokerSlow: summaryOf(brokerSlow),
      directIds: summaryOf(directIds),
      brokerIds: summaryOf(brokerIds),
      phases,
      handoff,
      pages,
    };
  } finally {
    await executor.stop();
  }
}

function summaryOf(reply: { summary?: Summary }): Summary {
  if (reply.summary === undefined) throw new Error('the executor answered without a summary');
  return reply.summary;
}

interface Traced {
  path: string;
  count: SyncCount;
  actions: number;
}

/** Table 4: the same actions again, under strace, in windows of a known number of actions. */
async function traceFsyncs(targets: Targets, scratch: string): Promise<Traced[]> {
  const rows: Traced[] = [];
  const executorTrace = path.join(scratch, 'executor.strace');
  const executor = await Executor.start(executorTrace);
  try {
    await executor.run({ op: 'setup', origins: targets });
    await executor.run({ op: 'broker', target: 'fast', concurrency: 8, ...bounds.tracedWarmup });
    const trace = FsyncTrace.of(executorTrace, executor.pid);
    for (const [label, target, concurrency, b] of [
      ['executor, c1', 'fast', 1, bounds.tracedC1],
      ['executor, c64', 'fast', 64, bounds.tracedC64],
      [`executor, c16, ${remoteDelayMs} ms remote`, 'slow', 16, bounds.tracedRemote],
    ] as const) {
      const from = trace.mark();
      const reply = await executor.run({ op: 'broker', target, concurrency, ...b });
      rows.push({ path: label, count: await trace.countSince(from), actions: summaryOf(reply).count });
    }
  } finally {
    await executor.stop();
  }
  const daemonTrace = path.join(scratch, 'daemon.strace');
  const mcp = await startMcpRig(targets.fast, daemonTrace);
  try {
    await drive(() => mcp.post(), 1, { runMs: 500, opsMax: 20 });
    const trace = FsyncTrace.of(daemonTrace, mcp.daemonPid);
    const from = trace.mark();
    const s = await drive(() => mcp.post(), 1, bounds.tracedC1);
    rows.push({ path: 'MCP → daemon, c1', count: await trace.countSince(from), actions: s.count });
  } finally {
    await mcp.stop();
  }
  return rows;
}

function printLatency(m: Measured, fsyncP50: number, floor: SyncFloor): void {
  const goalMs = 2 * fsyncP50 + 0.5;
  console.log('### 1. Added latency at concurrency 1 (auto-approved POST, loopback target)');
  console.log('');
  console.log(`goal: added p50 <= 2 x fsync p50 + 0.5 ms = ${ms(goalMs)} ms`);
  console.log('');
  console.log('| path | n | p50 ms | p95 ms | added p50 ms | added p95 ms | goal |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- |');
  const d = m.directC1;
  console.log(`| direct undici | ${d.count} | ${ms(d.p50)} | ${ms(d.p95)} | — | — | |`);
  for (const [name, s] of [
    ['executor (executeHttpAction)', m.brokerC1],
    ['MCP SDK client → postern mcp → daemon', m.mcpC1],
  ] as const) {
    const added = s.p50 - d.p50;
    console.log(
      `| ${name} | ${s.count} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(added)} | ${ms(s.p95 - d.p95)} | ${verdict(added <= goalMs)} |`,
    );
  }
  console.log('');
  console.log(
    `Per action in the executor's process, ms (event loop busy time / CPU time of the whole process, every thread): executor ` +
      `${cpuPerOp(m.brokerC1)}, direct undici ${cpuPerOp(d)}`,
  );
  console.log(
    `Per POST through MCP, ms of CPU (every thread of each process, /proc): the daemon ${m.mcpCpu.daemon.toFixed(3)}, ` +
      `the shim ${m.mcpCpu.shim.toFixed(3)}, the bench's own process (the SDK client and the target servers) ` +
      `${m.mcpC1.cpuMsPerOp?.toFixed(3) ?? '—'}`,
  );
  console.log('');
  console.log(
    'The floor (bench/sync-floor.ts, same run, before the rows above): the WAL sync alone, on a scratch database committing ' +
      "k pages at a time, inline and as WalSync waits for it (libuv's pool); a c1 action waits for two. Today a c1 commit " +
      'writes ~15 pages (table 4); a commit of its events alone would write a few.',
  );
  console.log('');
  for (const line of syncFloorTable(floor)) console.log(line);
  console.log('');
  for (const pages of [15, 1]) console.log(syncFloorLine(floor, fsyncP50, pages));
  console.log('');
}

function printThroughput(m: Measured): void {
  const b = m.brokerC64;
  const c = m.ceiling;
  const ratio = (b.perSecond * b.eventsPerAction) / c.perSecond;
  console.log('### 2. Concurrency 64: durable actions/s against the journal ceiling (same run)');
  console.log('');
  console.log(`ceiling replays the broker's own journal writes per action: ${c.mix}`);
  console.log('');
  console.log('| measure | value | goal |');
  console.log('| --- | ---: | --- |');
  console.log(
    `| broker durable actions/s (executor, c64, ${b.count} actions) | ${perSecond(b.perSecond)} | ` +
      `>= 2,000: ${verdict(b.perSecond >= 2_000)} |`,
  );
  console.log(`| broker latency p50 / p95 ms | ${ms(b.p50)} / ${ms(b.p95)} | |`);
  console.log(`| executor's event loop busy | ${loopBusy(b)} | |`);
  console.log(`| per action, ms: executor's event loop busy / its process's CPU (every thread) | ${cpuPerOp(b)} | |`);
  console.log(`| events per action (journal rows written / actions) | ${b.eventsPerAction.toFixed(2)} | |`);
  console.log(`| broker events/s | ${perSecond(b.perSecond * b.eventsPerAction)} | |`);
  console.log(`| journal ceiling events/s (group commit, 64 dispatchers) | ${perSecond(c.perSecond)} | |`);
  console.log(
    `| journal ceiling as actions/s (${c.eventsPerAction.toFixed(2)} events each) | ` +
      `${perSecond(c.perSecond / c.eventsPerAction)} | |`,
  );
  console.log(`| broker / ceiling | ${(100 * ratio).toFixed(1)} % | >= 80 %: ${verdict(ratio >= 0.8)} |`);
  console.log('');
}

/**
 * Per operation of the process that drove it, ms: its event loop's busy time (wall time not idle: it includes time the
 * host did not run the process) / the whole process's CPU time.
 */
function cpuPerOp(s: Summary): string {
  if (s.loopMsPerOp === undefined || s.cpuMsPerOp === undefined) return '—';
  return `${s.loopMsPerOp.toFixed(3)} / ${s.cpuMsPerOp.toFixed(3)}`;
}

/** The executor process's event loop over one drive (below 100 %: the loop waited for something, not for CPU). */
function loopBusy(s: Summary): string {
  return s.loopBusy === undefined ? '—' : `${(100 * s.loopBusy).toFixed(0)} %`;
}

function printRemote(m: Measured): void {
  const ratio = m.brokerSlow.perSecond / m.directSlow.perSecond;
  console.log(`### 3. Remote answering after ${remoteDelayMs} ms, concurrency 16`);
  console.log('');
  console.log('| path | n | req/s | p50 ms | p95 ms | event loop busy | per action ms: loop busy / process CPU |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const [name, s] of [
    ['direct undici', m.directSlow],
    ['executor', m.brokerSlow],
    ['direct undici, answers with 4 id headers', m.directIds],
    ['executor, answers with 4 id headers', m.brokerIds],
  ] as const)
    console.log(
      `| ${name} | ${s.count} | ${perSecond(s.perSecond)} | ${ms(s.p50)} | ${ms(s.p95)} | ${loopBusy(s)} | ${cpuPerOp(s)} |`,
    );
  console.log('');
  console.log(`broker / direct throughput: ${ratio.toFixed(2)} x (goal >= 0.9 x: ${verdict(ratio >= 0.9)})`);
  const idsRatio = m.brokerIds.perSecond / m.directIds.perSecond;
  console.log(
    `with 4 id headers in each answer (a request id, an etag, a traceparent, a base64 id; each scrubbed, bench/scrub.ts): ` +
      `${idsRatio.toFixed(2)} x`,
  );
  console.log('');
}

function printFsyncs(rows: readonly Traced[] | string): void {
  console.log('### 4. fsyncs per action, observed (strace -f on the broker process, every thread)');
  console.log('');
  if (typeof rows === 'string') {
    console.log(`not measured: ${rows}`);
    console.log('');
    return;
  }
  console.log(
    "The WAL's sync in the kernel (strace -T) is the disk's part of a commit's wait; table 6 times the whole wait. " +
      'WAL pages: the frames the commits wrote (one pwrite64 each, by thread), what a commit costs besides its sync.',
  );
  console.log('');
  console.log(
    '| path | actions | sync calls | per action | on the event loop | off the loop (threadpool, workers) | by file (per action) | WAL fdatasync in the kernel p50 / p90 ms | WAL pages per action: on the loop / off |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |');
  for (const r of rows) {
    const per = (n: number): string => (n / r.actions).toFixed(2);
    const files = [...r.count.byFile].map(([file, n]) => `${file} ${per(n)}`).join(', ');
    const kernel = quantiles(r.count.walSyncMs);
    console.log(
      `| ${r.path} | ${r.actions} | ${r.count.total} | ${per(r.count.total)} | ${per(r.count.onLoop)} | ${per(r.count.offLoop)} | ${files} | ${kernel} | ` +
        `${per(r.count.walPages.onLoop)} / ${per(r.count.walPages.offLoop)} |`,
    );
  }
  console.log('');
}

/** `p50 / p90` of a sample in ms, or a dash when there is none. */
function quantiles(values: readonly number[]): string {
  return values.length === 0 ? '—' : `${ms(percentile(values, 50))} / ${ms(percentile(values, 90))}`;
}

function printPhases(m: Measured): void {
  console.log("### 6. Where one action's time goes (executor, auto-approved POST; p50 / p90 ms per phase)");
  console.log('');
  console.log(
    "Each phase runs from one of the action's appends to the next (asked: the call; done: its promise settled).",
  );
  console.log('Medians of phases do not add up to the median of the whole.');
  console.log('');
  console.log(`| phase | ${m.phases.map((p) => `${p.label} (${p.phases.actions} actions)`).join(' | ')} |`);
  console.log(`| --- | ${m.phases.map(() => '---:').join(' | ')} |`);
  const first = m.phases[0]?.phases;
  for (const [i, row] of (first?.rows ?? []).entries()) {
    const cells = m.phases.map((p) => {
      const r = p.phases.rows[i];
      return r === undefined ? '—' : `${ms(r.p50)} / ${ms(r.p90)}`;
    });
    console.log(`| ${row.name} | ${cells.join(' | ')} |`);
  }
  console.log(
    `| **whole action** | ${m.phases.map((p) => `${ms(p.phases.total.p50)} / ${ms(p.phases.total.p90)}`).join(' | ')} |`,
  );
  console.log('');
}

function printHandoff(m: Measured): void {
  const h = m.handoff;
  const c = m.ceiling;
  // The ceiling's loop is busy throughout: its time per action is the journal's own work for one action.
  const journalMsPerAction = (1_000 * c.eventsPerAction) / c.perSecond;
  const kib = (bytes: number): string => (bytes / 1024).toFixed(0);
  console.log(
    `### 7. The writer thread's hand-off (issue 18, docs/journal-writer-thread.md): the ${h.batches} batches the ` +
      `planner posted for ${h.actions} actions replayed at once (${h.events} events), p50`,
  );
  console.log('');
  console.log(
    `Serialized: ${kib(h.bytes)} KiB in all, ${kib(h.bytes / h.batches)} KiB a batch, ` +
      `${(h.bytes / h.actions / 1024).toFixed(2)} KiB an action; the action rows ${kib(h.actionRowBytes)} KiB ` +
      `(${((100 * h.actionRowBytes) / h.bytes).toFixed(0)} %). Against the journal's own work per action at its ` +
      `ceiling (table 2): ${ms(journalMsPerAction)} ms, which the writer thread takes off the loop; the serializer ` +
      'runs on the loop instead.',
  );
  console.log('');
  console.log('| step | all batches ms | per action ms | share of the journal work moved |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, batchMs, onLoop] of [
    ['serialize (postMessage, on the loop)', h.serializeMs, true],
    ['deserialize (on the writer)', h.deserializeMs, false],
    ['structuredClone (what postMessage copies, both sides)', h.cloneMs, false],
  ] as const) {
    const perAction = batchMs / h.actions;
    const share = onLoop ? `${((100 * perAction) / journalMsPerAction).toFixed(1)} %` : '—';
    console.log(`| ${name} | ${ms(batchMs)} | ${perAction.toFixed(4)} | ${share} |`);
  }
  console.log('');
  console.log(
    `Typed arrays that are views into a larger buffer (postMessage copies the whole buffer, once per batch): ` +
      `${h.sharedViews}, their buffers ${kib(h.sharedViewExtraBytes)} KiB.`,
  );
  console.log('');
  console.log(
    `Round trip to an idle worker with a count for ack: the largest batch (${h.roundTripEvents} events) ` +
      `${ms(h.roundTripMs)} ms, an empty message (the hop alone) ${ms(h.emptyRoundTripMs)} ms.`,
  );
  console.log('');
}

function printCommitPages(m: Measured): void {
  const p = m.pages;
  console.log(
    `### 8. What an action's commits write (bench/commit-pages.ts): ${p.actions} actions at c1, one after another, ` +
      `${p.commits} commits, ${(p.pages / p.actions).toFixed(1)} WAL pages an action`,
  );
  console.log('');
  console.log(
    'First action, commit by commit: ' +
      p.firstAction.map((c, i) => `${i + 1}: ${c.pages} pages (${c.trees.join(', ')})`).join('; ') +
      '. Each page is a WAL frame the commit writes on the loop and the sync flushes.',
  );
  console.log('');
  console.log('| b-tree (table or index) | pages an action |');
  console.log('| --- | ---: |');
  for (const row of p.byTree) console.log(`| ${row.tree} | ${row.perAction.toFixed(1)} |`);
  console.log('');
}

/** Table 5 is bench/cli-start.ts itself, run as a child so its own set-up (a built bundle) is unchanged. */
async function cliStart(): Promise<void> {
  console.log('### 5. CLI and shim cold start (bench/cli-start.ts; goal < 300 ms to first output, bundle)');
  console.log('');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(import.meta.dirname, 'cli-start.ts'), String(cliStartRuns)],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) console.log(`cli-start exited with ${code}`);
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(path.join(tmpdir(), 'postern-bench-durable-'));
  const fast = await listen(0);
  const slow = await listen(remoteDelayMs);
  const ids = await listen(remoteDelayMs, idHeaders);
  try {
    console.log(`## Durable path bench (issue 18), ${new Date().toISOString()}`);
    console.log('');
    console.log(machineLine(scratch));
    const fsync = rawFsyncMs(scratch);
    console.log(
      `raw fsync of the data dir's disk (4 KiB write + fsync, ${fsync.count} samples): ` +
        `p50 ${ms(fsync.p50)} ms, p95 ${ms(fsync.p95)} ms, p99 ${ms(fsync.p99)} ms`,
    );
    console.log(
      `warm-up before the timed rows: ${bounds.warmup.runMs / 1000} s of broker actions at c8 in the executor, ` +
        `${bounds.warmup.runMs / 1000} s of POSTs at c8 through the daemon (a broker just started is slower while V8 ` +
        'compiles: docs/benchmarks.md)',
    );
    console.log('');
    const floor = await measureSyncFloor(scratch);
    const targets = { fast: fast.origin, slow: slow.origin, ids: ids.origin };
    const measured = await measure(targets);
    printLatency(measured, fsync.p50, floor);
    printThroughput(measured);
    printRemote(measured);
    const unavailable = straceUnavailable();
    printFsyncs(unavailable ?? (await traceFsyncs(targets, scratch)));
    if (!process.argv.includes('--no-cli-start')) await cliStart();
    printPhases(measured);
    printHandoff(measured);
    printCommitPages(measured);
  } finally {
    for (const { server } of [fast, slow, ids]) {
      server.closeAllConnections();
      server.close();
    }
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
