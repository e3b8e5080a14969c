import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { measureUntilMet } from '../testing/event-loop-gaps.js';
import { WalCheckpointer, type CheckpointReport, type WalCheckpointerOptions } from './wal-checkpointer.js';

let dir: TempDir;
let path: string;
let writer: Database.Database;
const open: WalCheckpointer[] = [];

/** The journal's writer as it will run: WAL, synchronous=NORMAL, and no checkpoint inside COMMIT. */
function openWriter(): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
  return db;
}

/** `count` commits of one `bytes`-long row each. */
function commitRows(count: number, bytes: number, each?: () => void): void {
  const insert = writer.prepare('INSERT INTO rows (body) VALUES (?)');
  const body = Buffer.alloc(bytes, 7);
  for (let i = 0; i < count; i += 1) {
    insert.run(body);
    each?.();
  }
}

function start(options: Partial<WalCheckpointerOptions> & { reports?: CheckpointReport[]; failures?: unknown[] } = {}) {
  const reports = options.reports ?? [];
  const failures = options.failures ?? [];
  const checkpointer = WalCheckpointer.start(path, {
    onFailure: (cause) => failures.push(cause),
    onCheckpoint: (report) => reports.push(report),
    ...options,
  });
  open.push(checkpointer);
  return { checkpointer, reports, failures };
}

const walPath = (): string => `${path}-wal`;

beforeEach(() => {
  dir = createTempDir('postern-wal-checkpointer-');
  path = join(dir.path, 'journal.sqlite');
  writer = openWriter();
});

afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
  if (writer.open) writer.close();
  dir.remove();
});

describe('when asked after commits with autocheckpoint off on the writer', () => {
  it('copies every WAL frame into the database file', async () => {
    commitRows(200, 8_000);
    const dbBytesBefore = statSync(path).size;
    const { checkpointer, reports, failures } = start();
    await checkpointer.whenReady();
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(failures).toEqual([]);
    expect(reports).toHaveLength(1);
    const [report] = reports;
    expect(report?.busy).toBe(0);
    expect(report?.log).toBeGreaterThan(200);
    expect(report?.checkpointed).toBe(report?.log);
    expect(statSync(path).size).toBeGreaterThan(dbBytesBefore + 200 * 8_000);
  });

  it('checkpoints after enough commits, sized by the frames the last ones wrote', async () => {
    // ~3 frames a commit at 4 KiB pages: a 30-frame target asks after ~10 commits once one checkpoint has measured it.
    const { checkpointer, reports } = start({ walFramesPerCheckpoint: 30 });
    await checkpointer.whenReady();
    commitRows(63, 8_000, () => checkpointer.committed());
    await checkpointer.whenIdle();
    expect(reports).toHaveLength(0);
    commitRows(1, 8_000, () => checkpointer.committed());
    await checkpointer.whenIdle();
    expect(reports).toHaveLength(1);
    commitRows(20, 8_000, () => checkpointer.committed());
    await checkpointer.whenIdle();
    expect(reports.length).toBeGreaterThanOrEqual(2);
    // A checkpoint that ran while these commits still landed copies the frames it saw; the WAL may have grown since.
    expect(reports.every((r) => r.busy === 0 && r.checkpointed > 0 && r.checkpointed <= r.log)).toBe(true);
  });

  it('coalesces requests while one runs into one more', async () => {
    commitRows(50, 8_000);
    const { checkpointer, reports } = start();
    await checkpointer.whenReady();
    for (let i = 0; i < 10; i += 1) checkpointer.request();
    await checkpointer.whenIdle();
    expect(reports.length).toBeGreaterThanOrEqual(1);
    expect(reports.length).toBeLessThanOrEqual(2);
  });
});

describe('when commits keep landing while checkpoints run', () => {
  it('holds them for a short catch-up, so the next commit resets the WAL', async () => {
    const { checkpointer, reports } = start({ walFramesPerCheckpoint: 200 });
    await checkpointer.whenReady();
    const insert = writer.prepare('INSERT INTO rows (body) VALUES (?)');
    const body = Buffer.alloc(3_000, 7);
    let holds = 0;
    // Up to three rounds of 1,500 commits, until one was held: on a loaded machine the checkpointer's thread may not
    // run during the first round at all (bounded in count; a checkpointer that never holds still fails).
    for (let round = 0; round < 3 && holds === 0; round += 1) {
      for (let i = 0; i < 1_500; i += 1) {
        if (checkpointer.holdsCommits) {
          holds += 1;
          await checkpointer.whenCommitsMayResume();
        }
        insert.run(body);
        checkpointer.committed();
        // The journal commits between other work: the worker's answers arrive between batches.
        if (i % 5 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    }
    await checkpointer.whenIdle();
    expect(holds).toBeGreaterThan(0);
    // Frames counted from the WAL's start: a drop means the writer began writing from the start again.
    const resets = reports.filter((r, i) => i > 0 && r.log < (reports[i - 1]?.log ?? 0)).length;
    expect(resets).toBeGreaterThan(0);
  });
});

/** The WAL header's checkpoint sequence and salts: SQLite changes them exactly when a write begins the WAL again. */
const walGeneration = (): string => {
  const fd = openSync(walPath(), 'r');
  try {
    const header = Buffer.alloc(12);
    readSync(fd, header, 0, 12, 12);
    return header.toString('hex');
  } finally {
    closeSync(fd);
  }
};

/** Commits as the journal makes them (waiting out catch-ups), counting those that began the WAL again themselves. */
async function commitsRestartingTheWal(checkpointer: WalCheckpointer): Promise<number> {
  const insert = writer.prepare('INSERT INTO rows (body) VALUES (?)');
  const body = Buffer.alloc(3_000, 7);
  let restarts = 0;
  for (let i = 0; i < 1_500; i += 1) {
    if (checkpointer.holdsCommits) await checkpointer.whenCommitsMayResume();
    const before = existsSync(walPath()) ? walGeneration() : undefined;
    insert.run(body);
    if (before !== undefined && walGeneration() !== before) restarts += 1;
    checkpointer.committed();
    if (i % 5 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await checkpointer.whenIdle();
  return restarts;
}

describe('when given a reset write', () => {
  it('the WAL begins again on the worker after each full copy: the writer’s commits (on the loop) do not restart it', async () => {
    writer.exec('CREATE TABLE resets (n INTEGER NOT NULL)');
    const { checkpointer, reports } = start({
      walFramesPerCheckpoint: 200,
      resetWrite: 'INSERT INTO resets (n) VALUES (1)',
    });
    await checkpointer.whenReady();
    // A commit that lands in the instant between a copy and the reset write still restarts it itself (at most one
    // in a run like this); without the option every full copy is followed by one (the next test: several). A reset
    // needs a copy of every frame with no commit meanwhile: on a loaded machine the worker can finish fewer such
    // copies in one run, so runs go on (at most four) until three resets happened.
    let runs = 0;
    let restartedByCommits = 0;
    const resetsSoFar = (): number => reports.filter((r) => r.reset).length;
    while (runs < 4 && (runs === 0 || resetsSoFar() < 3)) {
      restartedByCommits += await commitsRestartingTheWal(checkpointer);
      runs += 1;
    }
    expect(restartedByCommits).toBeLessThanOrEqual(runs);
    const resets = resetsSoFar();
    expect(resets).toBeGreaterThanOrEqual(3);
    expect(checkpointer.resets).toBe(resets);
    expect(writer.prepare('SELECT count(*) AS n FROM resets').get()).toEqual({ n: resets });
  });

  it('after a checkpoint that copied every frame with no commit meanwhile, the WAL begins again before the next commit', async () => {
    writer.exec('CREATE TABLE resets (n INTEGER NOT NULL)');
    const { checkpointer, reports } = start({ resetWrite: 'INSERT INTO resets (n) VALUES (1)' });
    await checkpointer.whenReady();
    commitRows(50, 3_000);
    const before = walGeneration();
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(reports.map((r) => r.reset)).toEqual([true]);
    const restarted = walGeneration();
    expect(restarted).not.toBe(before);
    commitRows(1, 3_000);
    expect(walGeneration()).toBe(restarted);
  });

  it('without one, the writer’s first commit after a full copy restarts the WAL (on its own thread)', async () => {
    const { checkpointer, reports } = start({ walFramesPerCheckpoint: 200 });
    await checkpointer.whenReady();
    expect(await commitsRestartingTheWal(checkpointer)).toBeGreaterThanOrEqual(3);
    expect(reports.some((r) => r.reset)).toBe(false);
  });
});

describe('when a large checkpoint runs', () => {
  it('keeps the event loop turning meanwhile', async () => {
    const { checkpointer, reports } = start();
    await checkpointer.whenReady();
    /** One checkpoint of ~40 MB of WAL, with the loop's largest gap between turns while it ran. */
    const checkpointWatched = async () => {
      commitRows(1_000, 40_000);
      let ticks = 0;
      let gapMaxMs = 0;
      let last = performance.now();
      let running = true;
      const tick = (): void => {
        const now = performance.now();
        gapMaxMs = Math.max(gapMaxMs, now - last);
        last = now;
        ticks += 1;
        if (running) setImmediate(tick);
      };
      setImmediate(tick);
      checkpointer.request();
      await checkpointer.whenIdle();
      running = false;
      return { report: reports.at(-1), ticks, gapMaxMs };
    };
    // Up to three checkpoints until one meets the bound: a loaded box can stop the whole process for longer than a
    // checkpoint once (a 262 ms gap in a 236 ms one was seen at load 5); on the loop, every one breaks it.
    const runs = await measureUntilMet({
      label: 'wal-checkpointer.test',
      measure: checkpointWatched,
      meets: (run) => run.gapMaxMs < (run.report?.ms ?? 0) / 2,
      describe: (run) => `took ${run.report?.ms} ms with a loop gap of ${run.gapMaxMs.toFixed(1)} ms`,
    });
    const run = runs.at(-1);
    if (run === undefined) throw new Error('no checkpoint was measured');
    const { report, ticks, gapMaxMs } = run;
    expect(report?.checkpointed).toBe(report?.log);
    // On the loop, one turn would have lasted the whole copy and its two fsyncs.
    expect(report?.ms).toBeGreaterThan(10);
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(gapMaxMs).toBeLessThan((report?.ms ?? 0) / 2);
  }, 60_000);
});

describe('when closed', () => {
  it('waits for the checkpoint in flight, ends its thread, and leaves the writer last to remove the WAL', async () => {
    commitRows(100, 8_000);
    const { checkpointer, reports } = start();
    await checkpointer.whenReady();
    checkpointer.request();
    await checkpointer.close();
    expect(reports).toHaveLength(1);
    expect(checkpointer.threadEnded).toBe(true);
    // Later commits ask nothing of a closed checkpointer.
    checkpointer.committed();
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(existsSync(walPath())).toBe(true);
    commitRows(1, 100);
    writer.close();
    expect(existsSync(walPath())).toBe(false);
    const reread = new Database(path, { readonly: true });
    expect(reread.prepare('SELECT count(*) AS n FROM rows').get()).toEqual({ n: 101 });
    reread.close();
  });
});

/** A checkpointer over a WAL with 8,000 rows committed whose first checkpoint fails with `code`, once ready. */
async function startFaultingOnce(code: string): Promise<ReturnType<typeof start>> {
  commitRows(10, 8_000);
  let fault: string | undefined = code;
  const started = start({
    faultForTest: () => {
      const next = fault;
      fault = undefined;
      return next;
    },
  });
  await started.checkpointer.whenReady();
  return started;
}

describe('when a checkpoint fails', () => {
  it('reports an I/O error once through onFailure and asks for no more', async () => {
    const { checkpointer, reports, failures } = await startFaultingOnce('SQLITE_IOERR_FSYNC');
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(failures).toHaveLength(1);
    expect((failures[0] as { code?: string }).code).toBe('SQLITE_IOERR_FSYNC');
    checkpointer.request();
    for (let i = 0; i < 100; i += 1) checkpointer.committed();
    await checkpointer.whenIdle();
    expect(reports).toHaveLength(0);
    await checkpointer.close();
    expect(failures).toHaveLength(1);
    expect(checkpointer.threadEnded).toBe(true);
  });

  it('treats SQLITE_BUSY as "later", not as a failure', async () => {
    const { checkpointer, reports, failures } = await startFaultingOnce('SQLITE_BUSY');
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(checkpointer.busyAnswers).toBe(1);
    expect(reports).toHaveLength(0);
    checkpointer.request();
    await checkpointer.whenIdle();
    expect(failures).toEqual([]);
    expect(reports).toHaveLength(1);
    expect(reports[0]?.checkpointed).toBe(reports[0]?.log);
  });

  it('reports a database it cannot open through onFailure and whenReady', async () => {
    path = join(dir.path, 'missing.sqlite');
    const { checkpointer, failures } = start();
    await expect(checkpointer.whenReady()).rejects.toMatchObject({ code: 'SQLITE_CANTOPEN' });
    expect(failures).toHaveLength(1);
    checkpointer.request();
    await checkpointer.close();
    expect(checkpointer.threadEnded).toBe(true);
  });
});
