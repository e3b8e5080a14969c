import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../../testing/action-paths.js';
import { dropColumnAddedBy019, dropIndexAddedBy018 } from '../../testing/older-journal.js';
import { readSessionCounters, scanSessionCounts } from '../../testing/session-counts.js';
import { inSession, sessionStartedEvent } from '../../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration017SessionCounters } from './017-session-counters.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const sessions = ['ses_m017_a', 'ses_m017_b', 'ses_m017_c'] as const;

/** Counted from the file on its own connection. */
function onFile<T>(path: string, read: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

describe('when a version 16 journal whose sessions have actions in every state is migrated to 17', () => {
  it('counts every session’s calls and pending once from the actions table, and later commits keep them exact', async () => {
    const t: TempJournal = await openTempJournal();
    cleanups.push(() => t.dispose());
    for (const [i, id] of sessions.entries()) await t.journal.appendSession(sessionStartedEvent(id, 9100 + i));
    // Session a: 40 actions, session b: 9, session c: none; and two no session asked for. Each cut at a point of its
    // path: open before dispatch (pending), dispatched, classified before or after dispatch.
    const paths = [actionPaths.httpNoApproval, actionPaths.rejectedByPerson, actionPaths.http500] as const;
    const owners: (string | null)[] = [
      ...Array<string>(40).fill(sessions[0]),
      ...Array<string>(9).fill(sessions[1]),
      null,
      null,
    ];
    for (const [i, owner] of owners.entries()) {
      const path = paths[i % paths.length]!(`act_m017_${String(i).padStart(3, '0')}`);
      await t.journal.appendBatch(inSession(path.slice(0, [1, 3, 4, undefined][i % 4]), owner));
    }
    await t.journal.close();

    // What a version 16 broker left: the same tables without session_counters.
    const old = new Database(t.path);
    old.exec(`DROP TABLE session_counters; PRAGMA user_version = 16`);
    dropIndexAddedBy018(old);
    dropColumnAddedBy019(old);
    const scan = scanSessionCounts(old);
    expect(scan.map((r) => r.session_id)).toEqual([sessions[0], sessions[1]]);
    expect(scan.find((r) => r.session_id === sessions[0])).toMatchObject({ calls: 40 });
    expect(scan.every((r) => r.pending > 0 && r.pending < r.calls)).toBe(true);
    const events = old.prepare('SELECT * FROM events ORDER BY seq').all();

    expect(migrate(old, journalMigrations.slice(0, 17))).toBe(migration017SessionCounters.version);
    expect(schemaVersion(old)).toBe(17);
    expect(readSessionCounters(old)).toEqual(scan);
    expect(old.prepare('SELECT * FROM events ORDER BY seq').all()).toEqual(events);
    old.close();

    // The journal opens on it (recovery's writes are counted) and every later commit moves the counters exactly.
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    cleanups.push(() => journal.close());
    const listed = (): Record<string, { calls: number; pending: number }> =>
      Object.fromEntries(
        journal.listCountedSessions().map((s) => [s.session.session_id, { calls: s.calls, pending: s.pending }]),
      );
    const scanned = (): Record<string, { calls: number; pending: number }> => ({
      [sessions[2]]: { calls: 0, pending: 0 },
      ...Object.fromEntries(
        onFile(t.path, scanSessionCounts).map((r) => [r.session_id, { calls: r.calls, pending: r.pending }]),
      ),
    });
    expect(listed()).toEqual(scanned());
    expect(listed()[sessions[0]]?.calls).toBe(40);
    await journal.appendBatch(inSession(actionPaths.httpNoApproval('act_m017_new').slice(0, 2), sessions[2]));
    expect(listed()[sessions[2]]).toEqual({ calls: 1, pending: 1 });
    await journal.appendBatch(actionPaths.httpNoApproval('act_m017_new').slice(2));
    expect(listed()[sessions[2]]).toEqual({ calls: 1, pending: 0 });
    expect(listed()).toEqual(scanned());
    expect(onFile(t.path, readSessionCounters)).toEqual(onFile(t.path, scanSessionCounts));
  });
});
