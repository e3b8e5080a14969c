/**
 * `status`, `metrics` and `sessions.list` latency (issue #18): the full scans of the actions table `status` and
 * `metrics` ran before schema 11, and the per-session action reads `sessions.list` ran before schema 17, against the
 * counters they read since, at 10k / 100k / 1M actions.
 *
 *   node --import tsx bench/status-metrics.ts [parent dir for the temp data dirs] [sizes, e.g. 10000,100000]
 *
 * Not part of the test run. Each size builds a journal: one real action per path of broker/testing/action-paths.ts
 * through the Journal (so the rows, their state JSON and every index are what the broker writes), then copies of those
 * rows under new ids and tickets up to the size, spread over event time so the rate's hour holds some of them and over
 * 100 agent sessions (started through the Journal), then the counters built by migrations 011's and 017's own
 * statements. The machine may be loaded; the table is medians.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { foldMetrics } from '../broker/core/index.js';
import { Journal } from '../broker/journal/journal.js';
import { sessionStartedEvent } from '../broker/testing/session-events.js';
import { JournalStore } from '../broker/journal/journal-store.js';
import { buildActionCounters } from '../broker/journal/migrations/011-status-counters.js';
import { buildOutcomeMinutes } from '../broker/journal/migrations/022-rate-counts-settled.js';
import { buildSessionCounters } from '../broker/journal/migrations/017-session-counters.js';
import { scanActionCounts, scanOutcomeCounts } from '../broker/journal/read-snapshot.js';
import { actionPathNames, actionPaths } from '../broker/testing/action-paths.js';
import { scanSessionCounts } from '../broker/testing/session-counts.js';
import { createMemoryVault } from '../broker/testing/memory-vault.js';
import { FakeClock } from '../broker/testing/fake-clock.js';

const parentDir = process.argv[2] ?? tmpdir();
const sizes = (process.argv[3] ?? '10000,100000,1000000').split(',').map(Number);
/** Runs per measurement after one warm-up run; the scans at 1M take ~0.5 s each, so a size costs ~10 s of reads. */
const runs = 7;
/** The copies' updated_at_ms step: 1M actions span ~16 h of event time, so the rate's hour holds ~60k. */
const stepMs = 60;
/** Agent sessions the copies are spread over: at 100k actions and up each has more than the 1,000 rows read before. */
const sessionsCount = 100;
const sessionIdOf = (k: number): string => `ses_bench_${String(k).padStart(3, '0')}`;

/** The newest 1,000 sessions' ids, newest first (what sessions.list lists; the journal holds them in memory). */
function newestSessionIds(db: Database.Database): string[] {
  return (
    db.prepare('SELECT session_id FROM sessions ORDER BY first_seq DESC LIMIT 1000').all() as Array<{
      session_id: string;
    }>
  ).map((r) => r.session_id);
}

/** sessions.list before schema 17: each listed session's first 1,000 actions read and parsed, then counted. */
function sessionsListBefore(
  store: JournalStore,
  ids: readonly string[],
): { session_id: string; calls: number; pending: number }[] {
  return ids.map((sessionId) => {
    const actions = store.listSessionActions(sessionId, 1_000);
    const pending = actions.filter((a) => a.outcome === null && a.dispatch_seq === null).length;
    return { session_id: sessionId, calls: actions.length, pending };
  });
}

/** sessions.list since: the listed sessions' counter rows (Journal.listCountedSessions, store.sessionFigures). */
function sessionsListAfter(
  store: JournalStore,
  ids: readonly string[],
): { session_id: string; calls: number; pending: number }[] {
  const figures = store.sessionFigures(ids);
  return ids.map((sessionId) => ({ session_id: sessionId, ...(figures.get(sessionId) ?? { calls: 0, pending: 0 }) }));
}

async function buildJournal(dir: string, size: number): Promise<string> {
  const clock = new FakeClock();
  const journal = await Journal.open({ dataDir: dir, clock, vault: await createMemoryVault() });
  for (let k = 0; k < sessionsCount; k += 1) {
    const pid = 40_000 + k;
    await journal.appendSession(sessionStartedEvent(sessionIdOf(k), pid, { cwd: '/home/bench', client_name: 'bench' }));
  }
  for (const [i, name] of actionPathNames.entries()) {
    const script = actionPaths[name](`act_template_${i}`);
    await journal.appendBatch(script.slice(0, i % 4 === 0 ? 3 : undefined));
    clock.advance(1_000);
  }
  await journal.close();
  const path = join(dir, 'journal.sqlite');
  const db = new Database(path);
  try {
    const templates = actionPathNames.length;
    const base = clock.nowMs();
    db.exec('BEGIN');
    // Copies of the real rows (every column as the broker wrote it) under fresh ids, tickets and times.
    db.prepare(
      `
      WITH RECURSIVE i(n) AS (SELECT ${templates + 1} UNION ALL SELECT n + 1 FROM i WHERE n < ?),
        t AS (SELECT row_number() OVER (ORDER BY first_seq) - 1 AS k, * FROM actions)
      INSERT INTO actions
      SELECT 'act_bench_' || i.n, printf('ses_bench_%03d', i.n % ${sessionsCount}), i.n, t.lane, t.channel, t.target, t.request_fingerprint, t.approval,
        t.idempotent, t.stage, t.decision, t.dispatch_evidence, CASE WHEN t.dispatch_seq IS NULL THEN NULL ELSE i.n END,
        t.outcome, t.phase, t.retry, t.code, t.effect, t.outcome_basis, t.source, t.retry_after_ms,
        t.caller_disposition, t.recorded, t.result_id, t.result_digest, i.n, i.n, ? + i.n * ${stepMs},
        ? + i.n * ${stepMs}, t.state, t.target_name, t.decided_by, t.decided_at_ms, t.decided_seq,
        t.dispatched_at_ms, t.settled_at_ms, t.resolved_at_ms
      FROM i JOIN t ON t.k = i.n % ${templates}`,
    ).run(size, base, base);
    // The copies' state JSON keeps its template's session_id; sessions.list reads only the column and the counters.
    buildActionCounters(db);
    buildOutcomeMinutes(db);
    buildSessionCounters(db);
    db.exec('COMMIT');
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return path;
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function timeMs(read: () => unknown): number {
  read();
  const samples: number[] = [];
  for (let r = 0; r < runs; r += 1) {
    const t0 = performance.now();
    read();
    samples.push(performance.now() - t0);
  }
  return median(samples);
}

function pad(value: string | number, width: number): string {
  return String(value).padStart(width);
}

async function measure(size: number): Promise<void> {
  const dir = mkdtempSync(join(parentDir, 'postern-bench-status-'));
  try {
    const t0 = performance.now();
    const path = await buildJournal(dir, size);
    const buildS = (performance.now() - t0) / 1000;
    const db = new Database(path, { readonly: true });
    try {
      const store = new JournalStore(db);
      const ids = newestSessionIds(db);
      const total = store.actionCounts().total;
      // Same answers, or the timing means nothing.
      if (JSON.stringify(store.actionCounts()) !== JSON.stringify(scanActionCounts(db)))
        throw new Error('status: the counters and the scan disagree');
      if (JSON.stringify(foldMetrics(store.outcomeCounts())) !== JSON.stringify(foldMetrics(scanOutcomeCounts(db))))
        throw new Error('metrics: the counters and the scan disagree');
      // sessions.list's figures are exact now: equal to a count over the whole table (before, they stopped at 1,000).
      const exact = new Map(scanSessionCounts(db).map((r) => [r.session_id, r]));
      const listed = sessionsListAfter(store, ids);
      if (
        listed.length !== sessionsCount ||
        listed.some((s) => JSON.stringify(s) !== JSON.stringify(exact.get(s.session_id)))
      )
        throw new Error('sessions.list: the counters and the scan disagree');
      const row = [
        pad(total, 9),
        pad((statSync(path).size / 2 ** 20).toFixed(0), 8),
        pad(buildS.toFixed(1), 7),
        pad(timeMs(() => scanActionCounts(db)).toFixed(3), 12),
        pad(timeMs(() => store.actionCounts()).toFixed(3), 12),
        pad(timeMs(() => foldMetrics(scanOutcomeCounts(db))).toFixed(3), 13),
        pad(timeMs(() => foldMetrics(store.outcomeCounts())).toFixed(3), 13),
        pad(timeMs(() => sessionsListBefore(store, ids)).toFixed(3), 14),
        pad(timeMs(() => sessionsListAfter(store, ids)).toFixed(3), 14),
      ];
      console.log(row.join(' '));
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  console.log(
    `node ${process.version}, ${process.platform}/${process.arch}, ${availableParallelism()} CPUs: ${cpus()[0]?.model ?? 'unknown'}, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `median of ${runs} runs after one warm-up, ms; "before" = the scan query (sessions: each session's first 1,000 actions), "after" = the counters; ${sessionsCount} sessions`,
  );
  console.log('');
  console.log(
    `${pad('actions', 9)} ${pad('file MB', 8)} ${pad('build s', 7)} ${pad('status bef.', 12)} ${pad('status aft.', 12)} ${pad('metrics bef.', 13)} ${pad('metrics aft.', 13)} ${pad('sessions bef.', 14)} ${pad('sessions aft.', 14)}`,
  );
  for (const size of sizes) await measure(size);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
