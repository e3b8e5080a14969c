import { afterEach, describe, expect, it } from 'vitest';
import { closedSessionRefusal } from '../actions/agent-answers.js';
import { parseConfig } from '../config/index.js';
import { Journal } from '../journal/index.js';
import { sessionStartedEvent } from '../testing/session-events.js';
import { editSessionRow } from '../testing/session-rows.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { codedRefusal } from '../testing/queue-waits.js';
import { person } from '../testing/queue-fixture.js';
import { ApprovalQueue } from './approval-queue.js';

/**
 * A person's decision on a session whose record is an earlier run's row the journal has not confirmed from its sealed
 * events (THREAT-MODEL 3: any process of the user can edit the journal file while no broker runs). The Sessions page
 * offers no Approve there; the API and `postern sessions approve` refuse it with a code that says what to do, and a
 * refusal told to the agent never names a person for a revocation only the file says.
 */
const opened: Array<{ t: TempJournal; journal?: Journal; queue?: ApprovalQueue }> = [];
afterEach(async () => {
  for (const o of opened.splice(0)) {
    o.queue?.close();
    await o.journal?.close();
    await o.t.dispose();
  }
});

/** A first run that leaves `ids` pending, `edit` applied to the file while no broker runs, and the next run's queue. */
async function nextRun(
  ids: string[],
  edit: (path: string) => void,
  locked: boolean,
): Promise<{ t: TempJournal; journal: Journal; queue: ApprovalQueue }> {
  const t = await openTempJournal();
  const entry: { t: TempJournal; journal?: Journal; queue?: ApprovalQueue } = { t };
  opened.push(entry);
  for (const [i, id] of ids.entries()) await t.journal.appendSession(sessionStartedEvent(id, 9100 + i));
  await t.journal.close();
  edit(t.path);
  if (locked) t.vault.lock();
  const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
  entry.journal = journal;
  const queue = ApprovalQueue.open({ journal, clock: t.clock, config: parseConfig('version: 1\n') });
  entry.queue = queue;
  return { t, journal, queue };
}

const approvals = (journal: Journal, id: string): number =>
  journal.subjectEvents(id).filter((e) => e.kind === 'SESSION_APPROVED').length;

describe('a decision on a session whose record the journal has not confirmed', () => {
  it('while locked, Approve is refused VAULT_LOCKED and nothing is journaled; after the unlock it is decided on the events’ record', async () => {
    const { t, journal, queue } = await nextRun(
      ['ses_unconf_1', 'ses_unconf_pending'],
      (path) => editSessionRow(path, 'ses_unconf_1', (s) => ({ ...s, status: 'approved', approved_by: 'person:ann' })),
      true,
    );
    const refused = await codedRefusal(queue.approveSession('ses_unconf_1', person));
    expect(refused).toMatchObject({ code: 'VAULT_LOCKED', field: 'session_id' });
    expect(refused.message).toContain('unlock, then decide');
    // One whose row still says pending is refused too: an approval folded over a row is not a record of one.
    expect(await codedRefusal(queue.approveSession('ses_unconf_pending', person))).toMatchObject({
      code: 'VAULT_LOCKED',
    });
    t.vault.unlock();
    expect(approvals(journal, 'ses_unconf_pending')).toBe(0);
    expect(approvals(journal, 'ses_unconf_1')).toBe(0);
    // Unlocked: the events say pending (the file's "approved" was forged), and the person's approval is recorded.
    await expect(queue.approveSession('ses_unconf_1', person)).resolves.toMatchObject({
      status: 'approved',
      approved_by: 'person:reviewer',
    });
    expect(approvals(journal, 'ses_unconf_1')).toBe(1);
  });

  it('a pending session whose row named another process: Approve is refused, since no approval of it is acted on in this run', async () => {
    const { journal, queue } = await nextRun(
      ['ses_moved_2'],
      (path) => editSessionRow(path, 'ses_moved_2', (s) => ({ ...s, pid: 9999, start_time: '999900' })),
      false,
    );
    const refused = await codedRefusal(queue.approveSession('ses_moved_2', person));
    expect(refused).toMatchObject({ code: 'DECISION_CONFLICT', field: 'session_id' });
    expect(refused.message).toContain('its approval is not used in this run');
    expect(approvals(journal, 'ses_moved_2')).toBe(0);
    // Revoking only takes away: still taken.
    await expect(queue.revokeSession('ses_moved_2', person, 'not mine')).resolves.toMatchObject({ status: 'revoked' });
  });

  it('the agent is told a revocation only the file says as the file’s word, never as a person’s', async () => {
    const { journal } = await nextRun(
      ['ses_forgedrev'],
      (path) =>
        editSessionRow(path, 'ses_forgedrev', (s) => ({
          ...s,
          status: 'revoked',
          revoked_by: 'person:ann',
          revoke_reason: 'x',
        })),
      true,
    );
    const session = journal.getSession('ses_forgedrev');
    if (session === undefined) throw new Error('no session');
    const told = closedSessionRefusal(session, 'nothing was accepted', () =>
      journal.sessionRecordCheck('ses_forgedrev'),
    );
    expect(told?.code).toBe('SESSION_REVOKED');
    expect(told?.message).not.toContain('a person revoked');
    expect(told?.message).toContain("this session's record says revoked (unconfirmed:");
    // Unverifiable: no unlock opens its events, so none is promised.
    const lost = closedSessionRefusal(session, 'nothing was accepted', () => 'unverifiable');
    expect(lost?.message).toContain(
      "this session's record says revoked (unconfirmed: its sealed events do not confirm",
    );
    expect(lost?.message).not.toContain('vault is unlocked');
    // Confirmed, a person's revocation is said as one.
    const confirmed = closedSessionRefusal(session, 'nothing was accepted', () => 'confirmed');
    expect(confirmed?.message).toBe('a person revoked this session; nothing was accepted');
  });
});
