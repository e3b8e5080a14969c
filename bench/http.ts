/**
 * HTTP channel benchmark: the latency the broker adds to an auto-approved POST (approval none,
 * bearer credential from a real vault, journal with fsync) against a local HTTP server, compared
 * with undici.request straight to the same server; p50/p99 and throughput at concurrency 1, 16
 * and 64. The journal's durable waits (the fsync-bound part: every append and the write-ahead
 * DISPATCH_STARTED) are timed separately, and the raw fsync latency of the disk is shown too.
 *
 *   node --import tsx bench/http.ts
 *
 * Not part of the test run. Every phase is bounded in time and count (about 30 s in total).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { HttpChannel } from '../broker/channels/http/index.js';
import { parseConfig } from '../broker/config/index.js';
import { ResultStore, type Journal } from '../broker/journal/index.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { ApprovalQueue } from '../broker/queue/approval-queue.js';
import { executeHttpAction } from '../broker/actions/execute-http-action.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { openVault } from '../broker/vault/index.js';

const concurrencies = [1, 16, 64] as const;
const runMsMax = 3_000;
const requestsMax = 20_000;
const warmupRequests = 200;
const fsyncSamplesMax = 1_000;
const body = JSON.stringify({ title: 'bench', n: 1 });

interface Run {
  latenciesMs: number[];
  seconds: number;
  journalWaitMs: number[];
}

async function main(): Promise<void> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  server.keepAliveTimeout = 10_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;

  const temp = await openTempJournal();
  const vaultDir = join(temp.dir.path, 'vault');
  mkdirSync(vaultDir);
  const vault = await openVault({ dataDir: vaultDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from('bench passphrase'));
  await vault.add({
    name: 'bench-token',
    kind: 'bearer',
    secret: Buffer.from('bench-secret-token'),
    bindings: ['bench'],
  });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  const config = parseConfig(
    [
      'version: 1',
      'routes:',
      '  - name: bench',
      `    base_url: http://127.0.0.1:${port}/api`,
      '    credential: bench-token',
      '    injection: bearer',
      '    approval: none',
      // One lane per document: the bench measures the broker, not the serialization of one lane.
      '    lanes:',
      "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }",
      '',
    ].join('\n'),
  );

  // Every durable wait of an action, summed per action: the journal is the only place that fsyncs.
  let currentWaits = new Map<string, number>();
  const timed = timeJournal(temp.journal, (actionId, ms) =>
    currentWaits.set(actionId, (currentWaits.get(actionId) ?? 0) + ms),
  );
  const channel = new HttpChannel({ gate: timed, limits: { idleConnectionsMax: 64 } });
  const ids = createRandomIdSource(systemClock);
  // Each request writes its own document (its own lane); the queue still admits, schedules and releases each.
  let documents = 0;
  const queue = ApprovalQueue.open({ journal: temp.journal, clock: systemClock, config });
  const agent = new Agent({ connections: 64, pipelining: 1 });
  const url = `http://127.0.0.1:${port}/api/documents/7`;

  const direct = async (): Promise<void> => {
    const res = await request(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
      dispatcher: agent,
    });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`direct: ${res.statusCode}`);
  };
  const broker = async (): Promise<string> => {
    const r = await executeHttpAction(
      { ids, clock: systemClock, journal: timed, results, vault, config, channel, queue },
      {
        route: 'bench',
        method: 'POST',
        path: `/documents/${(documents += 1)}`,
        body,
        headers: { 'content-type': 'application/json' },
      },
    );
    if (r.envelope.error !== undefined) throw new Error(`broker: ${r.envelope.error.code}`);
    return r.envelope.invocation_id;
  };

  await drive(direct, 8, runMsMax, warmupRequests);
  await drive(broker, 8, runMsMax, warmupRequests);

  const rows: string[] = [];
  for (const c of concurrencies) {
    const d = await drive(direct, c, runMsMax, requestsMax);
    currentWaits = new Map();
    const commitsBefore = temp.journal.stats().commits;
    const journalWaitMs: number[] = [];
    const b = {
      ...(await drive(broker, c, runMsMax, requestsMax, (id) => journalWaitMs.push(currentWaits.get(id) ?? 0))),
      journalWaitMs,
    };
    const commits = temp.journal.stats().commits - commitsBefore;
    rows.push(
      `| ${c} | ${fmt(pct(d.latenciesMs, 50))} / ${fmt(pct(d.latenciesMs, 99))} | ${fmt(pct(b.latenciesMs, 50))} / ${fmt(pct(b.latenciesMs, 99))} | ` +
        `${fmt(pct(b.latenciesMs, 50) - pct(d.latenciesMs, 50))} | ${fmt(pct(b.journalWaitMs, 50))} / ${fmt(pct(b.journalWaitMs, 99))} | ` +
        `${Math.round(d.latenciesMs.length / d.seconds)} | ${Math.round(b.latenciesMs.length / b.seconds)} | ${(commits / b.latenciesMs.length).toFixed(2)} |`,
    );
  }
  const fsyncMs = rawFsync(temp.dir.path);

  console.log(`machine: ${cpus().length} vCPU ${cpus()[0]?.model.trim() ?? ''}, Node ${process.version}`);
  console.log(
    `raw fsync (4 KiB write + fsync, ${fsyncMs.length} samples): p50 ${fmt(pct(fsyncMs, 50))} ms, p99 ${fmt(pct(fsyncMs, 99))} ms`,
  );
  console.log('');
  console.log(
    '| concurrency | direct undici p50 / p99 ms | broker p50 / p99 ms | added p50 ms | journal durable waits per action p50 / p99 ms | direct req/s | broker actions/s | journal commits per action (its own counter; fsyncs observed: bench:durable) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const row of rows) console.log(row);

  channel.close();
  await agent.close();
  server.close();
  results.close();
  await vault.close();
  await temp.dispose();
}

/** Runs `op` with `concurrency` workers until runMs or requestsMax. */
async function drive<T>(
  op: () => Promise<T>,
  concurrency: number,
  runMs: number,
  requestsMax: number,
  each?: (value: T) => void,
): Promise<Run> {
  const latenciesMs: number[] = [];
  const started = performance.now();
  let issued = 0;
  const worker = async (): Promise<void> => {
    while (issued < requestsMax && performance.now() - started < runMs) {
      issued += 1;
      const t0 = performance.now();
      const value = await op();
      latenciesMs.push(performance.now() - t0);
      each?.(value);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latenciesMs, seconds: (performance.now() - started) / 1000, journalWaitMs: [] };
}

/** The journal with its durable waits timed per action (append and beginDispatch). */
function timeJournal(journal: Journal, record: (actionId: string, ms: number) => void): Journal {
  return new Proxy(journal, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== 'append' && property !== 'beginDispatch')
        return typeof value === 'function' ? value.bind(target) : value;
      const fn = value as (...args: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]) => {
        const t0 = performance.now();
        try {
          return await fn.apply(target, args);
        } finally {
          const first = args[0];
          const actionId = typeof first === 'string' ? first : (first as { action_id: string }).action_id;
          record(actionId, performance.now() - t0);
        }
      };
    },
  });
}

function rawFsync(dir: string): number[] {
  const file = join(dir, 'fsync-probe');
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(4096, 1);
  const samples: number[] = [];
  const started = performance.now();
  while (samples.length < fsyncSamplesMax && performance.now() - started < 2_000) {
    const t0 = performance.now();
    writeSync(fd, block);
    fsyncSync(fd);
    samples.push(performance.now() - t0);
  }
  closeSync(fd);
  return samples;
}

function pct(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

function fmt(ms: number): string {
  return ms.toFixed(2);
}

await main();
