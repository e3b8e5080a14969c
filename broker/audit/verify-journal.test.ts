import { spawnSync } from 'node:child_process';
import {
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { getPriority } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { appendLeaf, auditHeaderText, emptyFrontier, encodeFrontier, encodeLeaf, leafHash } from '../core/index.js';
import { sha256 } from '../journal/event-cipher.js';
import { actionPaths } from '../testing/action-paths.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { threadNiceness } from '../testing/thread-niceness.js';
import { formatCheckpointFile, parseCheckpointFile, type TrustedCheckpoint } from './checkpoint-file.js';
import { latestCheckpoint } from './latest-checkpoint.js';
import { backgroundNiceness } from './verify-pool.js';
import { verifyJournal as verifySerial, type VerifyOptions, type VerifyReport } from './verify-journal.js';

/**
 * Every case runs both ways: the serial steps, and worker threads over 2-row subtrees (the Merkle
 * tree joined from many jobs, a partial last one). They must report the same thing; a tamper the
 * workers missed would show here as a pass beside the serial failure.
 */
async function verifyJournal(options: VerifyOptions): Promise<VerifyReport> {
  const serial = await verifySerial({ ...options, threads: 0 });
  let mode: string | undefined;
  const inWorkers = await verifySerial({
    ...options,
    threads: 2,
    parallelRowsMin: 1,
    chunkRowsLog2: 1,
    onMode: (m) => (mode = m),
  });
  expect(inWorkers).toEqual(serial);
  // The workers only ever prove a log good: a failure always comes from the serial steps.
  if (serial.ok && serial.events > 0) expect(mode).toBe('workers');
  return serial;
}

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

function tempDir(): TempDir {
  const dir = createTempDir('postern-verify-');
  cleanup.push(() => dir.remove());
  return dir;
}

/** `count` events from realistic action paths, checkpointed every 4, closed (shutdown checkpoint). */
async function writtenJournal(count: number): Promise<TempJournal> {
  const t = await openTempJournal({ checkpointEveryEvents: 4 });
  cleanup.push(() => t.dispose());
  await appendEvents(t, count, 0);
  await t.journal.close();
  return t;
}

async function appendEvents(t: TempJournal, count: number, salt: number): Promise<void> {
  const events: NewEvent[] = [];
  for (let n = 0; events.length < count; n += 1)
    events.push(...actionPaths.httpApproved(`act_verify_${salt}_${String(n).padStart(4, '0')}`));
  for (const event of events.slice(0, count)) {
    t.clock.advance(1);
    await t.journal.append(event);
  }
}

/** A copy of the journal to tamper with, the append-only triggers dropped as an attacker would. */
function tamperableCopy(t: TempJournal): { path: string; db: Database.Database } {
  const path = join(tempDir().path, 'journal.sqlite');
  copyFileSync(t.path, path);
  const db = new Database(path);
  cleanup.push(() => {
    if (db.open) db.close();
  });
  db.exec(
    `DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER checkpoints_no_update; DROP TRIGGER checkpoints_no_delete;`,
  );
  return { path, db };
}

function failure(report: VerifyReport): { code: string; seq: number | null } {
  if (report.ok) throw new Error('expected verify to fail, it passed');
  return { code: report.code, seq: report.seq };
}

/** An export of the newest checkpoint under the journal's key (these journals are honest; the CLI takes the vault's). */
function anchorOf(path: string): TrustedCheckpoint {
  const { checkpoint } = latestCheckpoint(path);
  if (checkpoint === undefined) throw new Error('no checkpoint to anchor on');
  return parseCheckpointFile(Buffer.from(formatCheckpointFile({ ...checkpoint, signPublic: journalKey(path) }, 0)));
}

function journalKey(path: string): Uint8Array {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare(`SELECT sign_public FROM audit_keys WHERE id = 1`).get() as { sign_public: Buffer }).sign_public;
  } finally {
    db.close();
  }
}

/** Recomputes every leaf and the stored tree head, as someone with the algorithm but no key can. */
function rechain(db: Database.Database): void {
  let frontier = emptyFrontier;
  const update = db.prepare(`UPDATE events SET leaf_hash = ? WHERE seq = ?`);
  for (const row of db.prepare(`SELECT * FROM events ORDER BY seq`).all() as Array<Record<string, never>>) {
    const r = row as unknown as { seq: number; run: number; nonce: Buffer; ciphertext: Buffer } & Parameters<
      typeof auditHeaderText
    >[0];
    const leaf = leafHash(sha256, encodeLeaf(r.seq, Buffer.from(auditHeaderText(r), 'utf8'), r.nonce, r.ciphertext));
    update.run(leaf, r.seq);
    frontier = appendLeaf(sha256, frontier, leaf);
  }
  db.prepare(`UPDATE audit_tree SET size = ?, frontier = ?`).run(frontier.size, encodeFrontier(frontier));
}

describe('when the log is intact', () => {
  it.each([0, 1, 2, 9])('a log of %i events verifies, with every checkpoint', async (count) => {
    const t = await writtenJournal(count);
    const report = await verifyJournal({ dbPath: t.path });
    expect(report).toMatchObject({ ok: true, events: count, unsigned_tail: 0 });
    if (count > 0)
      expect(await verifyJournal({ dbPath: t.path, anchor: anchorOf(t.path) })).toMatchObject({
        ok: true,
        anchor_size: count,
      });
  });

  it('reads the file without changing a byte', async () => {
    const t = await writtenJournal(5);
    const before = readFileSync(t.path);
    await verifyJournal({ dbPath: t.path });
    expect(readFileSync(t.path).equals(before)).toBe(true);
  });
});

const columns = [
  'at_ms',
  'action_id',
  'session_id',
  'ticket',
  'lane',
  'kind',
  'run',
  'outcome',
  'nonce',
  'ciphertext',
  'leaf_hash',
] as const;

describe('when one cell of one row is changed through SQL', () => {
  it('any single-byte change in any column of any row fails at that row (ROW_MODIFIED; ROW_MALFORMED for a row made run 0)', async () => {
    const t = await writtenJournal(11);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 11 }),
        fc.constantFrom(...columns),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (seq, column, at, xor) => {
          const { path, db } = tamperableCopy(t);
          const row = db.prepare(`SELECT ${column} AS v FROM events WHERE seq = ?`).get(seq) as { v: unknown };
          db.prepare(`UPDATE events SET ${column} = ? WHERE seq = ?`).run(changedOneByte(row.v, at, xor), seq);
          db.close();
          // run 0 marks plaintext rows, which have no nonce: a row claiming it with one is malformed.
          const expected = column === 'run' && changedOneByte(row.v, at, xor) === 0 ? 'ROW_MALFORMED' : 'ROW_MODIFIED';
          expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: expected, seq });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a byte flipped in a ciphertext inside the raw file fails ROW_MODIFIED at that row', async () => {
    const t = await writtenJournal(11);
    const reader = new Database(t.path, { readonly: true });
    const rows = reader.prepare(`SELECT seq, ciphertext FROM events ORDER BY seq`).all() as Array<{
      seq: number;
      ciphertext: Buffer;
    }>;
    reader.close();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...rows), fc.nat(), fc.integer({ min: 1, max: 255 }), async (row, at, xor) => {
        const path = join(tempDir().path, 'journal.sqlite');
        const bytes = readFileSync(t.path);
        const offset = bytes.indexOf(row.ciphertext);
        expect(offset).toBeGreaterThan(0);
        const i = offset + (at % row.ciphertext.length);
        bytes[i] = (bytes[i] as number) ^ xor;
        writeFileSync(path, bytes);
        expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'ROW_MODIFIED', seq: row.seq });
      }),
      { numRuns: 25 },
    );
  });
});

function changedOneByte(value: unknown, at: number, xor: number): unknown {
  if (value instanceof Uint8Array) {
    const copy = Buffer.from(value);
    const i = at % copy.length;
    copy[i] = (copy[i] as number) ^ xor;
    return copy;
  }
  if (typeof value === 'number') return value ^ (1 << (at % 8));
  if (typeof value === 'string') {
    const i = at % value.length;
    const code = value.charCodeAt(i) ^ (1 + (xor % 31));
    return value.slice(0, i) + String.fromCharCode(code) + value.slice(i + 1);
  }
  // null (a session or lane never set): any value is a change.
  return 'x';
}

describe('when rows are deleted, swapped or forged', () => {
  it('a deleted middle row fails ROW_MISSING at its position', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    db.prepare(`DELETE FROM events WHERE seq = 5`).run();
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'ROW_MISSING', seq: 5 });
  });

  it('a deleted last row fails TRUNCATED at its position', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    db.prepare(`DELETE FROM events WHERE seq = 9`).run();
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'TRUNCATED', seq: 9 });
  });

  it('two swapped rows fail ROW_MODIFIED at the first of them', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    const cols = columns.join(', ');
    const a = db.prepare(`SELECT ${cols} FROM events WHERE seq = 3`).get() as Record<string, unknown>;
    const b = db.prepare(`SELECT ${cols} FROM events WHERE seq = 6`).get() as Record<string, unknown>;
    const set = db.prepare(`UPDATE events SET ${columns.map((c) => `${c} = @${c}`).join(', ')} WHERE seq = @seq`);
    set.run({ ...b, seq: 3 });
    set.run({ ...a, seq: 6 });
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'ROW_MODIFIED', seq: 3 });
  });

  it('a forged row inserted and re-chained without the signing key fails FORKED at or before it', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    // Shift rows 6.. up by one and put a copy of row 2 (another action's fact) at 6, then rehash.
    for (let seq = 9; seq >= 6; seq -= 1) db.prepare(`UPDATE events SET seq = seq + 1 WHERE seq = ?`).run(seq);
    db.prepare(
      `INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, nonce, ciphertext, leaf_hash)
      SELECT 6, at_ms, action_id, session_id, ticket, lane, kind, run, nonce, ciphertext, leaf_hash FROM events WHERE seq = 2`,
    ).run();
    rechain(db);
    db.close();
    const { code, seq } = failure(await verifyJournal({ dbPath: path }));
    expect(code).toBe('FORKED');
    expect(seq).toBeLessThanOrEqual(6);
  });

  it('a forged row re-chained with the checkpoints removed still fails FORKED against an exported checkpoint', async () => {
    const t = await writtenJournal(9);
    const anchor = anchorOf(t.path);
    const { path, db } = tamperableCopy(t);
    db.prepare(
      `UPDATE events SET ciphertext = (SELECT ciphertext FROM events WHERE seq = 1), nonce = (SELECT nonce FROM events WHERE seq = 1) WHERE seq = 7`,
    ).run();
    rechain(db);
    db.exec(`DELETE FROM checkpoints`);
    db.close();
    expect((await verifyJournal({ dbPath: path })).ok).toBe(true);
    expect(failure(await verifyJournal({ dbPath: path, anchor }))).toMatchObject({ code: 'FORKED' });
  });

  it('a well-formed row appended behind the journal fails CHAIN_BROKEN at its position', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    const last = db.prepare(`SELECT * FROM events WHERE seq = 9`).get() as Record<string, unknown> & {
      nonce: Buffer;
      ciphertext: Buffer;
    };
    const row = { ...last, seq: 10, kind: 'OPERATOR_ATTESTED' };
    const leaf = leafHash(
      sha256,
      encodeLeaf(
        10,
        Buffer.from(auditHeaderText(row as unknown as Parameters<typeof auditHeaderText>[0]), 'utf8'),
        last.nonce,
        last.ciphertext,
      ),
    );
    db.prepare(
      `INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, nonce, ciphertext, leaf_hash)
      VALUES (@seq, @at_ms, @action_id, @session_id, @ticket, @lane, @kind, @run, @nonce, @ciphertext, @leaf_hash)`,
    ).run({ ...row, leaf_hash: leaf });
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'CHAIN_BROKEN', seq: 10 });
  });

  it('a changed checkpoint signature fails SIGNATURE_INVALID at its size', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(9));
    db.prepare(`UPDATE checkpoints SET signature = zeroblob(64) WHERE size = 4`).run();
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'SIGNATURE_INVALID', seq: 4 });
  });
});

describe('when the file is truncated or rolled back after a checkpoint was exported', () => {
  it('rows removed from the end (tree head and checkpoints made to agree) fail TRUNCATED against the export', async () => {
    const t = await writtenJournal(9);
    const anchor = anchorOf(t.path);
    const { path, db } = tamperableCopy(t);
    db.prepare(`DELETE FROM events WHERE seq > 6`).run();
    db.prepare(`DELETE FROM checkpoints WHERE size > 6`).run();
    rechain(db);
    db.close();
    expect(failure(await verifyJournal({ dbPath: path, anchor }))).toEqual({ code: 'TRUNCATED', seq: 7 });
  });

  it('an older copy of the whole file fails ROLLED_BACK against a later export', async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 5, 1);
    await t.journal.close();
    const older = join(tempDir().path, 'journal.sqlite');
    copyFileSync(t.path, older);
    const { Journal } = await import('../journal/journal.js');
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    await appendEvents({ ...t, journal: reopened }, 4, 2);
    await reopened.close();
    const anchor = anchorOf(t.path);
    expect(await verifyJournal({ dbPath: older })).toMatchObject({ ok: true, events: 5 });
    expect(failure(await verifyJournal({ dbPath: older, anchor }))).toEqual({ code: 'ROLLED_BACK', seq: 6 });
  });

  it("another journal's checkpoint fails KEY_MISMATCH", async () => {
    const a = await writtenJournal(3);
    const b = await writtenJournal(3);
    expect(failure(await verifyJournal({ dbPath: a.path, anchor: anchorOf(b.path) }))).toEqual({
      code: 'KEY_MISMATCH',
      seq: null,
    });
  });
});

describe('when the input is garbage', () => {
  it.each([
    ['random bytes', () => Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919 + 13) % 256))],
    [
      'a SQLite header followed by noise',
      () => Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096, 0xab)]),
    ],
  ])('%s named journal.sqlite fails DB_UNREADABLE, without a crash', async (_name, bytes) => {
    const path = join(tempDir().path, 'journal.sqlite');
    writeFileSync(path, bytes());
    expect(failure(await verifyJournal({ dbPath: path }))).toMatchObject({ code: 'DB_UNREADABLE' });
  });

  it('an empty file (an empty SQLite database) fails SCHEMA_UNSUPPORTED', async () => {
    const path = join(tempDir().path, 'journal.sqlite');
    writeFileSync(path, '');
    expect(failure(await verifyJournal({ dbPath: path }))).toMatchObject({ code: 'SCHEMA_UNSUPPORTED' });
  });

  it('a database of the right version with cells of the wrong type fails ROW_MALFORMED', async () => {
    const { path, db } = tamperableCopy(await writtenJournal(3));
    db.exec(`CREATE TABLE e2 AS SELECT * FROM events; DROP TABLE events; CREATE TABLE events AS SELECT * FROM e2;`);
    db.prepare(`UPDATE events SET nonce = 'not a blob' WHERE seq = 2`).run();
    db.close();
    expect(failure(await verifyJournal({ dbPath: path }))).toEqual({ code: 'ROW_MALFORMED', seq: 2 });
  });

  it('a garbage checkpoint file fails CHECKPOINT_FILE_INVALID', () => {
    expect(() => parseCheckpointFile(Buffer.from('{"format":"x"}'))).toThrow(
      expect.objectContaining({ code: 'CHECKPOINT_FILE_INVALID' }),
    );
    expect(() => parseCheckpointFile(Buffer.alloc(70_000, 0x20))).toThrow(
      expect.objectContaining({ code: 'CHECKPOINT_FILE_INVALID' }),
    );
  });
});

describe('when the broker is still appending', () => {
  it('verifies one consistent snapshot, never a half-seen append', async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 2 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 6, 3);
    let appended: Promise<unknown> | undefined;
    const report = await verifySerial({
      dbPath: t.path,
      // Progress is reported from inside the read, after the rows and before the tree head: append
      // one event and close, which commits it (and a checkpoint) synchronously, right then.
      onProgress: () => {
        appended ??= t.journal.append(actionPaths.httpApproved('act_verify_live_0001')[0] as NewEvent);
        void t.journal.close();
      },
    });
    await appended;
    expect(report).toMatchObject({ ok: true, events: 6 });
    expect(await verifySerial({ dbPath: t.path })).toMatchObject({ ok: true, events: 7 });
  });
});

describe('when the daemon verifies in the background', () => {
  it('its worker threads run at a lower CPU priority than the caller, which keeps its own', async (ctx) => {
    if (!existsSync('/proc/thread-self')) ctx.skip('no /proc/thread-self: thread priorities are Linux-only here');
    const base = getPriority();
    if (base >= 19) ctx.skip(`this process already runs at nice ${base}: no lower priority to take`);
    const t = await writtenJournal(8);
    const seen = async (background: boolean): Promise<number[]> => {
      const during: number[] = [];
      const report = await verifySerial({
        dbPath: t.path,
        threads: 2,
        parallelRowsMin: 1,
        chunkRowsLog2: 1,
        ...(background ? { background } : {}),
        // Heard while a worker that just checked rows is alive (it ends only after the last job).
        onProgress: () => {
          for (const [tid, nice] of threadNiceness()) if (tid !== process.pid) during.push(nice);
        },
      });
      expect(report).toMatchObject({ ok: true, events: 8 });
      return during;
    };
    const wanted = Math.min(19, base + backgroundNiceness);
    // The caller's run first: a background run's threads may outlive its answer by a moment.
    expect(await seen(false)).not.toContain(wanted);
    expect(await seen(true)).toContain(wanted);
    expect(getPriority()).toBe(base);
  });
});

/** The directory's names and sizes, as `ls -l` would show what verify left there. */
function listing(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .map((name) => `${name} ${statSync(join(dir, name)).size}`);
}

/** Events in the database file alone (no WAL): the rows a checkpoint has folded into it. */
async function eventsInMainFile(t: TempJournal): Promise<number> {
  const copy = join(tempDir().path, 'journal.sqlite');
  copyFileSync(t.path, copy);
  const report = await verifySerial({ dbPath: copy, threads: 0 });
  return report.ok ? report.events : -1;
}

describe('when verify reads a journal, it leaves the directory as it found it', () => {
  it('a copied closed journal: no -wal or -shm appears beside it', async () => {
    const t = await writtenJournal(9);
    const dir = tempDir().path;
    copyFileSync(t.path, join(dir, 'journal.sqlite'));
    const before = listing(dir);
    expect(before).toHaveLength(1);
    expect(await verifyJournal({ dbPath: join(dir, 'journal.sqlite') })).toMatchObject({ ok: true, events: 9 });
    expect(listing(dir)).toEqual(before);
  });

  it("a running journal's latest events, only in its WAL, are counted; nothing new appears", async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 7);
    // The test means something only while the newest rows are in the WAL, not yet folded into the file.
    expect(await eventsInMainFile(t)).toBeLessThan(9);
    const before = listing(dirname(t.path));
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true, events: 9 });
    expect(listing(dirname(t.path))).toEqual(before);
  });

  it("a running journal named through a symbolic link: its WAL's events are counted, beside the link's target", async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 10);
    expect(await eventsInMainFile(t)).toBeLessThan(9);
    const link = join(tempDir().path, 'journal.sqlite');
    symlinkSync(t.path, link);
    const before = listing(dirname(t.path));
    expect(await verifyJournal({ dbPath: link })).toMatchObject({ ok: true, events: 9 });
    expect(listing(dirname(t.path))).toEqual(before);
    expect(readdirSync(dirname(link))).toEqual(['journal.sqlite']);
  });

  it("a copy of a running journal's file and WAL (no -shm): the WAL's events are counted; no -shm appears", async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 8);
    expect(await eventsInMainFile(t)).toBeLessThan(9);
    const dir = tempDir().path;
    copyFileSync(t.path, join(dir, 'journal.sqlite'));
    copyFileSync(`${t.path}-wal`, join(dir, 'journal.sqlite-wal'));
    const before = listing(dir);
    expect(await verifyJournal({ dbPath: join(dir, 'journal.sqlite') })).toMatchObject({ ok: true, events: 9 });
    expect(listing(dir)).toEqual(before);
  });

  it("a private copy a killed verify left behind is removed by the next verify that copies; a live process's is kept", async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 11);
    const dir = tempDir().path;
    copyFileSync(t.path, join(dir, 'journal.sqlite'));
    copyFileSync(`${t.path}-wal`, join(dir, 'journal.sqlite-wal'));
    const tmp = join(dir, 'tmp');
    mkdirSync(tmp);
    // A process that has ended (its verify was killed before its finally) and one still running (the test runner's parent).
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    const stale = join(tmp, `postern-verify-${gone}-abc123`);
    const live = join(tmp, `postern-verify-${process.ppid}-def456`);
    for (const d of [stale, live]) {
      mkdirSync(d);
      writeFileSync(join(d, 'journal.sqlite'), 'a copy');
    }
    // Named like an ended verify's copy, but a link (to files of this user's) and, as root, another user's directory:
    // neither is removed, nor is anything a link leads to.
    const mine = join(dir, 'mine');
    mkdirSync(mine);
    writeFileSync(join(mine, 'keep'), 'this user');
    const link = `postern-verify-${gone}-link00`;
    symlinkSync(mine, join(tmp, link));
    const theirs = `postern-verify-${gone}-other0`;
    const kept = [link, `postern-verify-${process.ppid}-def456`];
    if (process.getuid?.() === 0) {
      mkdirSync(join(tmp, theirs));
      chownSync(join(tmp, theirs), 65534, 65534);
      kept.push(theirs);
    } else console.log('skipped the other-user directory case: only root can make a directory another user owns');
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    try {
      expect(await verifyJournal({ dbPath: join(dir, 'journal.sqlite') })).toMatchObject({ ok: true, events: 9 });
    } finally {
      if (saved === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = saved;
    }
    expect(readdirSync(tmp).sort()).toEqual(kept.sort());
    expect(readdirSync(mine)).toEqual(['keep']);
  });

  it("a file and WAL it cannot copy privately (no temporary directory) are still verified, under SQLite's locking", async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 9);
    const dir = tempDir().path;
    copyFileSync(t.path, join(dir, 'journal.sqlite'));
    copyFileSync(`${t.path}-wal`, join(dir, 'journal.sqlite-wal'));
    const tmp = process.env['TMPDIR'];
    process.env['TMPDIR'] = join(dir, 'no-such-dir');
    try {
      expect(await verifySerial({ dbPath: join(dir, 'journal.sqlite'), threads: 0 })).toMatchObject({
        ok: true,
        events: 9,
      });
    } finally {
      if (tmp === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = tmp;
    }
  });

  it('a copied file and WAL whose WAL a broker folds in and removes just before it is copied: looked at again, read immutable, nothing created', async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 13);
    expect(await eventsInMainFile(t)).toBeLessThan(9);
    const dir = tempDir().path;
    const path = join(dir, 'journal.sqlite');
    copyFileSync(t.path, path);
    copyFileSync(`${t.path}-wal`, `${path}-wal`);
    // The moment: between its look at the files (a -wal, no -shm: a private copy is due) and the copy of the -wal,
    // a private read first sweeps the copies ended verifies left, asking whether each one's process lives. A copy of
    // an ended process is put there, and when it is asked about, a broker opens the journal and closes it: SQLite
    // folds the WAL into the file and removes the -wal and the -shm its open made.
    const tmp = tempDir().path;
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    mkdirSync(join(tmp, `postern-verify-${gone}-moved0`));
    let folded = false;
    let seen: string[] = [];
    const kill = process.kill.bind(process);
    const spy = vi.spyOn(process, 'kill').mockImplementation((pid, signal) => {
      if (pid === gone && !folded) {
        folded = true;
        const db = new Database(path);
        db.prepare('SELECT count(*) FROM events').get();
        db.close();
        seen = readdirSync(dir).sort();
      }
      return kill(pid, signal);
    });
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    try {
      expect(await verifySerial({ dbPath: path, threads: 0 })).toMatchObject({ ok: true, events: 9 });
    } finally {
      spy.mockRestore();
      if (saved === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = saved;
    }
    expect(folded).toBe(true);
    // Asserted out here: inside the sweep's question a throw would read as "that process lives".
    expect(seen).toEqual(['journal.sqlite']);
    // The failed copy was taken for files that moved, not for a reason to read under SQLite's locking: that read would
    // have made a -wal and a -shm beside the journal, which verify promises never to do.
    expect(listing(dir)).toEqual([`journal.sqlite ${statSync(path).size}`]);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('a copied file and WAL written while verify reads its private copy is read again, so the report is of the file as it is', async () => {
    const t = await openTempJournal({ checkpointEveryEvents: 4 });
    cleanup.push(() => t.dispose());
    await appendEvents(t, 9, 12);
    const dir = tempDir().path;
    const path = join(dir, 'journal.sqlite');
    copyFileSync(t.path, path);
    copyFileSync(`${t.path}-wal`, `${path}-wal`);
    let wrote = false;
    const report = await verifySerial({
      dbPath: path,
      threads: 0,
      // From inside the read of the private copy: a writer opens the original (its WAL and a -shm), removes the last
      // row, and closes (the WAL folded into the file and removed).
      onProgress: () => {
        if (wrote) return;
        wrote = true;
        const db = new Database(path);
        db.exec(`DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq = 9;`);
        db.close();
      },
    });
    expect(wrote).toBe(true);
    expect(failure(report)).toEqual({ code: 'TRUNCATED', seq: 9 });
  });

  it('a closed journal written while verify reads it lock-free is read again, so the report is of the file as it is', async () => {
    const t = await writtenJournal(9);
    let wrote = false;
    const report = await verifySerial({
      dbPath: t.path,
      threads: 0,
      // From inside the read: a writer opens the journal (creating its WAL), removes the last row as an attacker
      // would, and closes, which folds the WAL into the file and removes it.
      onProgress: () => {
        if (wrote) return;
        wrote = true;
        const db = new Database(t.path);
        db.exec(`DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq = 9;`);
        db.close();
      },
    });
    expect(wrote).toBe(true);
    expect(failure(report)).toEqual({ code: 'TRUNCATED', seq: 9 });
    expect(listing(dirname(t.path))).toEqual([`journal.sqlite ${statSync(t.path).size}`]);
  });
});
