import { afterEach, describe, expect, it } from 'vitest';
import { Journal } from '../journal/index.js';
import { sessionStartedEvent } from '../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { confirmSessionsBehind, sessionsConfirmedPerTurn } from './session-confirmer.js';

const opened: Array<{ t: TempJournal; journal?: Journal }> = [];
afterEach(async () => {
  for (const o of opened.splice(0)) {
    await o.journal?.close();
    await o.t.dispose();
  }
});

/** An earlier run that left `ended` sessions ended and one pending, and the next run's journal, opened locked. */
async function reopenedLocked(ended: number): Promise<{ t: TempJournal; journal: Journal }> {
  const t = await openTempJournal();
  const entry: { t: TempJournal; journal?: Journal } = { t };
  opened.push(entry);
  for (let i = 0; i < ended; i++) {
    const id = `ses_behind_${String(i).padStart(3, '0')}`;
    await t.journal.appendSession(sessionStartedEvent(id, 6000 + i));
    await t.journal.appendSession({ kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } });
  }
  await t.journal.appendSession(sessionStartedEvent('ses_behind_live', 5999));
  await t.journal.close();
  t.vault.lock();
  // Counted, not timed: each turn may take as long as it needs (the time bound is sessions.test's).
  const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault, sessionsConfirmBudgetMs: 60_000 });
  entry.journal = journal;
  return { t, journal };
}

/** A schedule the test runs by hand: each turn queued, none run until asked. */
function manualTurns(): { schedule: (turn: () => void) => void; drain: () => number } {
  const queued: Array<() => void> = [];
  return {
    schedule: (turn) => queued.push(turn),
    drain: () => {
      let ran = 0;
      for (let turn = queued.shift(); turn !== undefined; turn = queued.shift()) {
        turn();
        ran += 1;
      }
      return ran;
    },
  };
}

describe('after an unlock, an earlier run’s sessions are confirmed behind the loop', () => {
  it('a bounded number a turn until none is left, then one notice; no list had to ask for them', async () => {
    const { t, journal } = await reopenedLocked(250);
    t.vault.unlock();
    const turns = manualTurns();
    let notices = 0;
    confirmSessionsBehind(journal, () => (notices += 1), turns.schedule);
    // 251 sessions read at open: three turns of at most 100.
    expect(sessionsConfirmedPerTurn).toBe(100);
    expect(turns.drain()).toBe(3);
    expect(notices).toBe(1);
    // Nothing is left to confirm: every session is the journal's own record (asking confirms nothing more).
    expect(journal.confirmHeldSessions(1_000)).toEqual({ tried: 0, settled: 0, left: false });
    expect(journal.sessionRecordCheck('ses_behind_000')).toBe('confirmed');
  });

  it('while locked it confirms nothing and says nothing, and a stop ends it before its next turn', async () => {
    const { t, journal } = await reopenedLocked(150);
    const locked = manualTurns();
    let notices = 0;
    confirmSessionsBehind(journal, () => (notices += 1), locked.schedule);
    locked.drain();
    expect(notices).toBe(0);
    expect(journal.sessionRecordCheck('ses_behind_000')).toBe('unconfirmed');

    // Unlocked, then stopped after its first turn: the rest waits for a list or the next unlock.
    t.vault.unlock();
    const stopping = manualTurns();
    let ran = 0;
    const stop = confirmSessionsBehind(
      journal,
      () => (notices += 1),
      (turn) =>
        stopping.schedule(() => {
          ran += 1;
          turn();
          if (ran === 1) stop();
        }),
    );
    stopping.drain();
    expect(notices).toBe(0);
    expect(ran).toBe(2);
    // 151 read at open, 100 confirmed before the stop: 51 left for whoever asks next.
    expect(journal.confirmHeldSessions(1_000)).toEqual({ tried: 51, settled: 51, left: false });
  });
});
