/**
 * The floor under issue 18's c1 row on the machine it runs on: what the journal's WAL sync costs as the event loop sees
 * it, with no broker work around it. A WAL database set up as the journal's (WAL, synchronous=NORMAL, no
 * autocheckpoint) commits k pages at a time, overwriting frames in place as the journal's WAL does once it has grown;
 * after each COMMIT its WAL is fdatasynced
 *
 *  - inline (`fdatasyncSync` on the loop: the disk's own time, what the bench's raw fsync probe also measures), and
 *  - as WalSync does it (`fs.fdatasync` on libuv's thread pool, the loop idle until the callback): the time the loop
 *    waits, which adds the pool thread's wake-up and the loop's (two threads on a VM's vCPUs) to the disk's.
 *
 * At concurrency 1 an action waits for two of the second kind (DISPATCH_STARTED, RESULT_COMMITTED); the issue keeps
 * the sync off the loop ("nothing synchronous on the loop"), so twice that p50 is a floor of the c1 row's added p50
 * that no CPU cut or journal layout removes, to set against the goal's 2 × raw fsync p50 + 0.5 ms.
 *
 *   node --import tsx bench/sync-floor.ts        (also run by bench/durable.ts for its table 1 floor line)
 *
 * Not part of the test run. Bounded: at most `samplesMax` commits per row and `rowMsMax` each.
 */
import { fdatasync, fdatasyncSync, mkdtempSync, openSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { machineLine, ms, percentile, rawFsyncMs } from './durable-measure.js';

/** Pages a commit writes: one (an event alone), 15 (one of today's c1 commits, bench table 4), 45 (a c1 action's). */
export const pagesPerCommit = [1, 4, 15, 45] as const;
const samplesMax = 400;
const rowMsMax = 3_000;
/** Commits that fill the WAL before a row is timed, so every timed commit overwrites frames in place. */
const warmCommits = 64;
/** Large enough that each updated row takes a page of its own (4 KiB pages). */
const rowBytes = 3_000;

export interface SyncFloorRow {
  readonly pages: number;
  readonly inline: { readonly p50: number; readonly p90: number };
  readonly pool: { readonly p50: number; readonly p90: number };
}

export interface SyncFloor {
  readonly rows: SyncFloorRow[];
  /** The row of a commit of `pages` pages. */
  row(pages: number): SyncFloorRow;
}

/** Measures every row of `pagesPerCommit` in a fresh WAL database under `dir` (removed after). */
export async function measureSyncFloor(dir: string): Promise<SyncFloor> {
  const scratch = mkdtempSync(join(dir, 'postern-sync-floor-'));
  const db = new Database(join(scratch, 'floor.sqlite'));
  const rows: SyncFloorRow[] = [];
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)');
    const upsert = db.prepare('INSERT OR REPLACE INTO t (id, b) VALUES (?, ?)');
    const commit = db.transaction((pages: number, fill: number) => {
      const bytes = Buffer.alloc(rowBytes, fill);
      for (let id = 0; id < pages; id++) upsert.run(id, bytes);
    });
    const wal = openSync(join(scratch, 'floor.sqlite-wal'), 'r');
    try {
      for (const pages of pagesPerCommit) {
        db.pragma('wal_checkpoint(TRUNCATE)');
        for (let i = 0; i < warmCommits; i++) commit(pages, i);
        fdatasyncSync(wal);
        // Every frame checkpointed: the next commit restarts the WAL from its start and overwrites in place.
        db.pragma('wal_checkpoint(PASSIVE)');
        const inline: number[] = [];
        const pool: number[] = [];
        const started = performance.now();
        for (let i = 0; i < samplesMax && performance.now() - started < rowMsMax; i++) {
          commit(pages, i);
          if (i % 2 === 0) {
            const t0 = performance.now();
            fdatasyncSync(wal);
            inline.push(performance.now() - t0);
          } else {
            const t0 = performance.now();
            await new Promise<void>((resolve, reject) => fdatasync(wal, (e) => (e ? reject(e) : resolve())));
            pool.push(performance.now() - t0);
          }
          if (i % 32 === 31) db.pragma('wal_checkpoint(PASSIVE)');
        }
        rows.push({
          pages,
          inline: { p50: percentile(inline, 50), p90: percentile(inline, 90) },
          pool: { p50: percentile(pool, 50), p90: percentile(pool, 90) },
        });
      }
    } finally {
      closeSync(wal);
    }
  } finally {
    db.close();
    rmSync(scratch, { recursive: true, force: true });
  }
  return {
    rows,
    row(pages) {
      const found = rows.find((r) => r.pages === pages);
      if (found === undefined) throw new Error(`no sync floor row for ${pages} pages`);
      return found;
    },
  };
}

/** The table this script prints, and bench/durable.ts's floor line under its table 1. */
export function syncFloorTable(floor: SyncFloor): string[] {
  return [
    '| WAL pages a commit | fdatasync inline p50 / p90 ms | through the thread pool, as the loop waits, p50 / p90 ms | the hop p50 ms |',
    '| ---: | ---: | ---: | ---: |',
    ...floor.rows.map(
      (r) =>
        `| ${r.pages} | ${ms(r.inline.p50)} / ${ms(r.inline.p90)} | ${ms(r.pool.p50)} / ${ms(r.pool.p90)} | ` +
        `${ms(r.pool.p50 - r.inline.p50)} |`,
    ),
  ];
}

/** Two syncs an action at c1, off the loop, for commits of `pages` pages, against the c1 goal's budget. */
export function syncFloorLine(floor: SyncFloor, fsyncP50: number, pages: number): string {
  const two = 2 * floor.row(pages).pool.p50;
  const budget = 2 * fsyncP50 + 0.5;
  return (
    `floor: two WAL syncs of ${pages}-page commits through the thread pool, as the loop waits for them, take ` +
    `${ms(two)} ms p50 with no other work (bench/sync-floor.ts), against the goal's ${ms(budget)} ms: ` +
    `${ms(Math.max(0, budget - two))} ms left for all of the broker's own work at c1`
  );
}

async function main(): Promise<void> {
  const dir = process.argv[2] ?? tmpdir();
  console.log(machineLine(dir));
  const fsync = rawFsyncMs(dir);
  console.log(
    `raw fsync (4 KiB write + fsync, bench/durable.ts's probe): p50 ${ms(fsync.p50)} ms, p99 ${ms(fsync.p99)}`,
  );
  console.log('');
  const floor = await measureSyncFloor(dir);
  for (const line of syncFloorTable(floor)) console.log(line);
  console.log('');
  for (const pages of [1, 15]) console.log(syncFloorLine(floor, fsync.p50, pages));
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
