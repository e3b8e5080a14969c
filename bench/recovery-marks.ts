/**
 * What recovery's check of the rows against the log costs (docs/audit.md, "Nor does recovery record over a row the log
 * refutes"): at open, the pass over events_dispatch_marks (journal migration 024) that names every action the log shows
 * in flight, and the pass over events_outcome_marks (migration 025) that names every action the log last left unknown,
 * by journal size; once, building both indexes when a journal is upgraded; and at every commit, their upkeep (the same
 * one-action transactions with and without them).
 *
 *   node --import tsx bench/recovery-marks.ts      (npm run bench:recovery-marks)
 *
 * Not part of the test run. The journals are synthetic: the real schema (every migration), events of eight kinds an
 * action as an HTTP POST writes them, headers with stand-in sealed bodies (the pass reads headers only) and the
 * outcome headers the journal writes (core eventOutcomeHeader), one action in a thousand left in flight and one in a
 * thousand recorded unknown. Bounded: at most 1M events a row, 3 timed passes a row, 2,000 commits each way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { journalMigrations } from '../broker/journal/migrations/index.js';
import { migrate } from '../broker/journal/migrate.js';
import { openDispatchesSql, openOutcomesSql } from '../broker/journal/journal-store.js';
import { machineLine, ms, percentile } from './durable-measure.js';

const sizes = [100_000, 1_000_000] as const;
const kinds = [
  'ACTION_ACCEPTED',
  'PREFLIGHT_VALIDATED',
  'CREDENTIAL_AUTHORIZED',
  'DISPATCH_STARTED',
  'REQUEST_SENT',
  'REMOTE_RESPONSE_COMPLETE',
  'RESULT_COMMITTED',
  'RESULT_DELIVERED',
] as const;
const nonce = Buffer.alloc(24, 1);
const body = Buffer.alloc(180, 2);
const leaf = Buffer.alloc(32, 3);

/** The outcome header of action i's event of `kind`: one action in a thousand recorded unknown, the others committed. */
function outcomeOf(i: number, kind: (typeof kinds)[number]): string | null {
  if (kind === 'DISPATCH_STARTED') return 'unknown';
  if (kind === 'RESULT_COMMITTED') return i % 1_000 === 11 ? 'unknown' : 'committed';
  return null;
}

function journalAt(dir: string, name: string): Database.Database {
  const db = new Database(join(dir, name));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  migrate(db, journalMigrations);
  return db;
}

/** Appends `actions` actions' headers, one transaction per `perCommit` actions; returns the ms per commit. */
function append(db: Database.Database, from: number, actions: number, perCommit: number): number[] {
  const insert = db.prepare(
    `INSERT INTO events (at_ms, action_id, session_id, ticket, lane, kind, run, outcome, nonce, ciphertext, leaf_hash)
     VALUES (?, ?, 'ses_bench', ?, ?, ?, 1, ?, ?, ?, ?)`,
  );
  const commit = db.transaction((first: number, last: number) => {
    for (let i = first; i < last; i += 1) {
      // Action ids begin with their time, as random-id-source makes them: each lands at the index's right edge.
      const id = `act_${String(i).padStart(10, '0')}BENCH`;
      for (const kind of kinds) {
        // One action in a thousand stopped after its DISPATCH_STARTED: in flight when the broker stopped.
        if (i % 1_000 === 7 && kinds.indexOf(kind) > kinds.indexOf('DISPATCH_STARTED')) break;
        insert.run(i, id, i + 1, `lane-${i % 64}`, kind, outcomeOf(i, kind), nonce, body, leaf);
      }
    }
  });
  const times: number[] = [];
  for (let i = from; i < from + actions; i += perCommit) {
    const t = performance.now();
    commit(i, Math.min(from + actions, i + perCommit));
    times.push(performance.now() - t);
  }
  return times;
}

/** Three passes of `sql`, each on a fresh read-only connection (as at a start): rows found, and p50 / max ms. */
function timedPasses(path: string, sql: string): { found: number; cell: string } {
  const passes: number[] = [];
  let found = 0;
  for (let i = 0; i < 3; i += 1) {
    const reader = new Database(path, { readonly: true });
    const t = performance.now();
    found = reader.prepare(sql).all().length;
    passes.push(performance.now() - t);
    reader.close();
  }
  return { found, cell: `${ms(percentile(passes, 50))} / ${ms(Math.max(...passes))}` };
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), 'postern-recovery-marks-'));
  try {
    console.log(machineLine(dir));
    console.log(
      '| events | actions | in flight found | its pass p50 / max ms | unknowns found | their pass p50 / max ms | both indexes built at upgrade ms |',
    );
    console.log('| ---: | ---: | ---: | --- | ---: | --- | ---: |');
    for (const events of sizes) {
      const actions = events / kinds.length;
      const name = `j-${events}.db`;
      const db = journalAt(dir, name);
      append(db, 0, actions, 10_000);
      db.exec('DROP INDEX events_dispatch_marks; DROP INDEX events_outcome_marks');
      db.pragma('user_version = 23');
      const built = performance.now();
      migrate(db, journalMigrations);
      const buildMs = performance.now() - built;
      db.close();
      const inFlight = timedPasses(join(dir, name), openDispatchesSql);
      const unknowns = timedPasses(join(dir, name), openOutcomesSql);
      console.log(
        `| ${events.toLocaleString('en-US')} | ${actions.toLocaleString('en-US')} | ${inFlight.found} | ${inFlight.cell} | ${unknowns.found} | ${unknowns.cell} | ${ms(buildMs)} |`,
      );
    }

    console.log('');
    console.log('| per commit of one action (8 events, no sync) | p50 ms | p95 ms |');
    console.log('| --- | ---: | ---: |');
    for (const withIndex of [false, true, false, true]) {
      const db = journalAt(dir, `c-${String(withIndex)}-${Math.random()}.db`);
      if (!withIndex) db.exec('DROP INDEX events_dispatch_marks; DROP INDEX events_outcome_marks');
      append(db, 0, 20_000, 1_000);
      const times = append(db, 20_000, 2_000, 1);
      db.close();
      console.log(
        `| ${withIndex ? 'with events_dispatch_marks and events_outcome_marks' : 'without them'} | ${ms(percentile(times, 50))} | ${ms(percentile(times, 95))} |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
