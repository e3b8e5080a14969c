import type Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths, impossibleEvents } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import type { JournalOpenOptions } from './journal.js';

const dispatchers = 32;
let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

function idOf(n: number): string {
  return `act_group_${String(n).padStart(4, '0')}`;
}

/** Opens a journal with `count` actions authorized and ready to dispatch, plus a second connection. */
async function readyToDispatch(
  count: number,
  options: Partial<Omit<JournalOpenOptions, 'vault'>> = {},
): Promise<{ t: TempJournal; reader: Database.Database }> {
  t = await openTempJournal(options);
  for (let n = 0; n < count; n += 1) {
    // Through CREDENTIAL_AUTHORIZED: the next durable step is DISPATCH_STARTED.
    await t.journal.appendBatch(actionPaths.httpNoApproval(idOf(n)).slice(0, 3));
  }
  // An independent connection, as another process would open the same file.
  return { t, reader: t.reader() };
}

function visibleDispatch(db: Database.Database, seq: number): unknown {
  return db.prepare(`SELECT action_id, kind FROM events WHERE seq = ? AND kind = 'DISPATCH_STARTED'`).get(seq);
}

describe('when many dispatchers begin dispatch in the same turn', () => {
  it('shares one commit, and each resolves only once its row is visible to another connection', async () => {
    const { t, reader } = await readyToDispatch(dispatchers);
    const commitsBefore = t.journal.stats().commits;
    const lastSeqBefore = t.journal.stats().last_seq;

    const observed: unknown[] = [];
    const dispatches = Array.from({ length: dispatchers }, (_, n) =>
      t.journal.beginDispatch(idOf(n), 1, { connection: 'fresh', connection_id: `conn-${n}` }).then((appended) => {
        // Checked at the moment of release, before any other code can run.
        observed.push(visibleDispatch(reader, appended.event.seq));
        return appended;
      }),
    );
    // Requested, not yet durable: nothing may be visible yet.
    expect(reader.prepare(`SELECT count(*) AS n FROM events WHERE seq > ?`).get(lastSeqBefore)).toEqual({ n: 0 });

    const appended = await Promise.all(dispatches);
    expect(observed).toEqual(appended.map((a) => ({ action_id: a.event.action_id, kind: 'DISPATCH_STARTED' })));
    expect(t.journal.stats().commits - commitsBefore).toBe(1);
    expect(new Set(appended.map((a) => a.event.seq)).size).toBe(dispatchers);
    expect(appended.every((a) => a.state.dispatch_seq === a.event.seq && a.state.outcome === 'unknown')).toBe(true);
    // The state tables moved in the same commit.
    expect(reader.prepare(`SELECT count(*) AS n FROM actions WHERE dispatch_seq IS NOT NULL`).get()).toEqual({
      n: dispatchers,
    });
  });

  it('splits the batch at batchEventsMax', async () => {
    const { t } = await readyToDispatch(dispatchers, { batchEventsMax: 8 });
    const before = t.journal.stats().commits;
    await Promise.all(
      Array.from({ length: dispatchers }, (_, n) => t.journal.beginDispatch(idOf(n), 1, { connection: 'reused' })),
    );
    expect(t.journal.stats().commits - before).toBe(dispatchers / 8);
  });

  it('commits once per append when group commit is off', async () => {
    const { t } = await readyToDispatch(dispatchers, { groupCommit: false });
    const before = t.journal.stats().commits;
    await Promise.all(
      Array.from({ length: dispatchers }, (_, n) => t.journal.beginDispatch(idOf(n), 1, { connection: 'reused' })),
    );
    expect(t.journal.stats().commits - before).toBe(dispatchers);
  });
});

describe('when dispatchers keep appending as soon as their last append is durable', () => {
  it('gathers each round into one commit', async () => {
    const { t } = await readyToDispatch(16);
    const before = t.journal.stats().commits;
    const rounds = 5;
    await Promise.all(
      Array.from({ length: 16 }, async (_, n) => {
        const rest = actionPaths.httpNoApproval(idOf(n)).slice(3, 3 + rounds);
        for (const event of rest) await t.journal.append(event);
      }),
    );
    expect(t.journal.stats().commits - before).toBe(rounds);
  });
});

describe('when a batch mixes valid and refused events', () => {
  it('refuses each bad event on its own and commits the rest in one transaction', async () => {
    const { t, reader } = await readyToDispatch(10);
    const before = t.journal.stats();
    const valid = Array.from({ length: 10 }, (_, n) => t.journal.beginDispatch(idOf(n), 1, { connection: 'fresh' }));
    const impossible = impossibleEvents(idOf(3)).map((e) => t.journal.append(e));
    const malformed = t.journal.append({
      kind: 'DISPATCH_STARTED',
      action_id: idOf(4),
      payload: { attempt: 1 },
    } as NewEvent);

    // Settle all at once: the refusals arrive before the commit, and must not go unhandled.
    const [validR, impossibleR, malformedR] = await Promise.all([
      Promise.allSettled(valid),
      Promise.allSettled(impossible),
      Promise.allSettled([malformed]),
    ]);
    expect(validR.map((r) => r.status)).toEqual(Array(10).fill('fulfilled'));
    expect(impossibleR.map((r) => r.status === 'rejected' && (r.reason as { code: string }).code)).toEqual(
      Array(impossibleR.length).fill('IMPOSSIBLE_TRANSITION'),
    );
    expect(malformedR[0]).toMatchObject({
      status: 'rejected',
      reason: { code: 'INVALID_ARGUMENT', field: 'payload.connection' },
    });
    expect(t.journal.stats()).toMatchObject({
      commits: before.commits + 1,
      events: before.events + 10,
      last_seq: before.last_seq + 10,
    });
    // No gaps: refused events never took an append position.
    const seqs = reader
      .prepare('SELECT seq FROM events ORDER BY seq')
      .all()
      .map((r) => (r as { seq: number }).seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  });
});
