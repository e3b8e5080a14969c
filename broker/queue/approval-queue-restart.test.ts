import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import type { NewEvent } from '../contract/index.js';
import { foldMetrics } from '../core/index.js';
import { Journal, type JournalOpenOptions } from '../journal/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { copyActionRow, writeActionRowBack } from '../testing/action-rows.js';
import { inSession, sessionStartedEvent } from '../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { ApprovalQueue, type Turn } from './approval-queue.js';
import { httpCardPreview, httpRequestView } from './card-preview.js';

const fp = `sha256:${'c'.repeat(64)}`;
const person = { kind: 'person' as const, id: 'reviewer' };
const config = parseConfig('version: 1\n');
const request = { method: 'POST', path: '/documents/7', query: [], headers: [], body: Buffer.from('{}') };
const preview = httpCardPreview({ name: 'docs', credential: 'docs-token' }, request, httpRequestView(request));

let temp: TempJournal;
afterEach(async () => {
  await temp.dispose();
});

const admit = (id: string, approval: 'none' | 'per_call'): NewEvent[] => [
  {
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    lane: 'document-7',
    payload: {
      channel: 'http',
      target: 'route:docs POST /documents/7',
      request_fingerprint: fp,
      approval,
      idempotent: false,
    },
  },
  { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
];

/**
 * The broker's restart: the journal closed and opened again on its file (recovery runs), with `options` such as a
 * quarantining judge; `temp` disposes the reopened one.
 */
async function restart(options: Pick<JournalOpenOptions, 'judgeBeforeRecovery'> = {}): Promise<Journal> {
  await temp.journal.close();
  const journal = await Journal.open({ path: temp.path, clock: temp.clock, vault: temp.vault, ...options });
  const { dir } = temp;
  temp = {
    ...temp,
    journal,
    dispose: async () => {
      await journal.close();
      dir.remove();
    },
  };
  return journal;
}

/**
 * `a`'s events appended up to its DISPATCH_STARTED (a crash there) or all of them; then, while no broker runs, its row
 * is put back to its copy from before the dispatch (THREAT-MODEL), and the broker restarts with the vault locked: the
 * journal holds `a` (its row refuted by the log).
 */
async function heldAfterLockedRestart(a: string, path: NewEvent[], until: 'dispatch' | 'whole path'): Promise<Journal> {
  const dispatch = path.findIndex((e) => e.kind === 'DISPATCH_STARTED');
  for (const event of path.slice(0, dispatch)) await temp.journal.append(event);
  const copy = copyActionRow(temp.path, a);
  for (const event of path.slice(dispatch, until === 'dispatch' ? dispatch + 1 : path.length))
    await temp.journal.append(event);
  await temp.journal.close();
  writeActionRowBack(temp.path, copy);
  temp.vault.lock();
  const journal = await restart();
  expect(journal.heldActions()).toEqual([a]);
  return journal;
}

/** Asks the queue for `id`'s turn and lets it answer what it can at once: `now` is the turn given by then, if any. */
async function askTurn(queue: ApprovalQueue, id: string): Promise<{ now: Turn | undefined; waiting: Promise<Turn> }> {
  let now: Turn | undefined;
  const waiting = queue.awaitTurn(id, preview).then((t) => {
    now = t;
    return t;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { now, waiting };
}

describe('when the broker restarts', () => {
  it('an unknown head left by the previous run still blocks its lane until a person abandons it', async () => {
    temp = await openTempJournal();
    const a = 'act_restartA0001';
    await temp.journal.appendBatch([
      ...admit(a, 'none'),
      {
        kind: 'CREDENTIAL_AUTHORIZED',
        action_id: a,
        payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
      },
    ]);
    await temp.journal.beginDispatch(a, 1, { connection: 'fresh' });
    // A pending per-call ticket of the old run: recovery closes it (not_attempted, BROKER_RESTARTED).
    const old = 'act_restartO0001';
    await temp.journal.appendBatch(admit(old, 'per_call'));

    const journal = await restart();
    expect(journal.getAction(a)).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED', recorded: true });
    expect(journal.getAction(old)).toMatchObject({ outcome: 'not_attempted', code: 'BROKER_RESTARTED' });

    const queue = ApprovalQueue.open({ journal, clock: temp.clock, config });
    const ticketA = journal.getAction(a)?.ticket ?? 0;
    expect(queue.cards().map((c) => [c.ticket, c.state, c.target, c.credential])).toEqual([
      [ticketA, 'blocked_head', 'route:docs', '(unknown)'],
    ]);
    // Dispatched, then unknown: the journal would take a retry lease on it, but no key was bound, so no request was
    // kept for a person to resend (build-card.test.ts has the keyed case).
    expect(queue.cards()[0]).toMatchObject({ dispatch_recorded: true, retry_possible: false });

    const b = 'act_restartB0001';
    await journal.appendBatch(admit(b, 'none'));
    const { now, waiting } = await askTurn(queue, b);
    expect(now).toBeUndefined();
    expect(queue.position(b)).toMatchObject({
      waiting: 'lane_blocked',
      waiting_for_ticket: ticketA,
      text: `blocked by #${ticketA} (outcome unknown)`,
    });
    await queue.abandon(ticketA, person, 'checked by hand after the restart');
    expect(await waiting).toEqual({ kind: 'go' });
    queue.close();
  });
});

describe('when the broker restarts on a journal its integrity anchor quarantined', () => {
  it('an action recovery recorded unknown before any card or dispatch shows as a blocked head and holds its lane', async () => {
    temp = await openTempJournal();
    // Admitted on a per-call route, its card not shown yet: recovery in a quarantined journal records it unknown.
    const a = 'act_quarantA0001';
    await temp.journal.appendBatch(admit(a, 'per_call'));

    const journal = await restart({ judgeBeforeRecovery: () => 'quarantined' });
    expect(journal.getAction(a)).toMatchObject({
      dispatch_seq: null,
      stage: 'validated',
      outcome: 'unknown',
      outcome_basis: 'broker_restart_journal_quarantined',
    });

    const queue = ApprovalQueue.open({ journal, clock: temp.clock, config });
    const ticketA = journal.getAction(a)?.ticket ?? 0;
    // No decision was recorded for it, yet its card is shown: a person must see it to end it.
    expect(queue.cards().map((c) => [c.ticket, c.state, c.waiting_for_ticket])).toEqual([
      [ticketA, 'blocked_head', null],
    ]);
    // No dispatch recorded, yet it may have been sent: the journal refuses it a retry lease, so the card offers none.
    expect(queue.cards()[0]).toMatchObject({ dispatch_recorded: false, retry_possible: false });

    const b = 'act_quarantB0001';
    await journal.appendBatch(admit(b, 'none'));
    const { now, waiting } = await askTurn(queue, b);
    expect(now).toBeUndefined();
    expect(queue.position(b)).toMatchObject({ waiting: 'lane_blocked', waiting_for_ticket: ticketA });
    await queue.abandon(ticketA, person, 'cannot tell whether it was sent');
    expect(await waiting).toEqual({ kind: 'go' });
    queue.close();
  });
});

describe('when the broker restarts while a card waits for a person and a ticket for its lane', () => {
  it('metrics count both as closed by the restart, never as a credential_injection failure', async () => {
    temp = await openTempJournal();
    // A per-call card shown and waiting for a person; behind it in its lane, an approval-none ticket waiting its turn.
    const card = 'act_restartC0001';
    const queued = 'act_restartQ0001';
    await temp.journal.appendBatch([
      ...admit(card, 'per_call'),
      { kind: 'CARD_SHOWN', action_id: card, payload: { expires_at_ms: temp.clock.nowMs() + 60_000 } },
    ]);
    await temp.journal.appendBatch(admit(queued, 'none'));

    const journal = await restart();
    // The journal says where the record stopped (DESIGN §3: the approval gate is credential_injection's) ...
    expect(journal.getAction(card)).toMatchObject({ stage: 'card_shown', outcome: 'not_attempted' });
    expect(journal.getAction(queued)).toMatchObject({ stage: 'validated', outcome: 'not_attempted' });
    // ... and metrics, read from the stored counters, count what closed them: the restart, no phase failing.
    const m = foldMetrics(journal.outcomeCounts());
    expect(m.decisions).toEqual([{ decision: 'restarted', count: 2 }]);
    expect(m.by_phase_outcome).toEqual([]);
    expect(m.by_code).toEqual([]);
    expect(m).toMatchObject({ open: 0, total: 2 });
    expect(m.rate.by_decision).toEqual([{ decision: 'restarted', counts: expect.any(Array) as number[] }]);
  });
});

describe("when the broker restarts on a journal whose settled action's row was written back to before its dispatch", () => {
  it('the held action keeps its lane until the unlock, when its own events say settled and the next ticket goes', async () => {
    temp = await openTempJournal();
    const a = 'act_heldA0001';
    // Committed; then, while no broker runs, its row is put back to its copy from before the dispatch.
    const journal = await heldAfterLockedRestart(a, actionPaths.httpNoApproval(a), 'whole path');

    const queue = ApprovalQueue.open({ journal, clock: temp.clock, config });
    journal.onHeldRecovered((ids) => queue.heldRecovered(ids));
    const b = 'act_heldB0001';
    await journal.appendBatch(
      admit(b, 'none').map((e) => (e.kind === 'ACTION_ACCEPTED' ? { ...e, lane: 'lane-a' } : e)),
    );
    const { now, waiting } = await askTurn(queue, b);
    expect(now).toBeUndefined();
    expect(queue.position(b)).toMatchObject({ waiting_for_ticket: journal.getAction(a)?.ticket });
    // The held ticket says it is held, not what its rewritten row reads ("next to dispatch"); nothing to decide on it.
    expect(queue.cards().map((c) => [c.action_id, c.state, c.text])).toContainEqual([
      a,
      'dispatching',
      expect.stringContaining('held: its record was found rewritten at this start'),
    ]);

    temp.vault.unlock();
    const turn = await Promise.race([
      waiting,
      new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000)),
    ]);
    expect(turn).toEqual({ kind: 'go' });
    expect(journal.sealedAction(a)).toMatchObject({ outcome: 'committed' });
    queue.close();
  });
});

describe('when a session is revoked while one of its actions is held (its row refuted at this start)', () => {
  it('the held action is skipped, and every open ticket of the session is still cancelled', async () => {
    temp = await openTempJournal();
    const session = 'ses_heldrevoke00001';
    await temp.journal.appendSession(sessionStartedEvent(session, 4242));
    const a = 'act_heldRevA0001';
    const journal = await heldAfterLockedRestart(a, inSession(actionPaths.httpNoApproval(a), session), 'dispatch');

    const queue = ApprovalQueue.open({ journal, clock: temp.clock, config });
    const b = 'act_heldRevB0001';
    await journal.appendBatch(
      admit(b, 'none').map((e) => (e.kind === 'ACTION_ACCEPTED' ? { ...e, lane: 'lane-a', session_id: session } : e)),
    );
    const { now, waiting } = await askTurn(queue, b);
    expect(now).toBeUndefined();
    await queue.revokeSession(session, person, 'not mine');
    expect(journal.getAction(b)).toMatchObject({ outcome: 'not_attempted', decision: expect.anything() });
    expect(await waiting).toMatchObject({ kind: 'closed' });
    expect(journal.heldActions()).toEqual([a]);
    queue.close();
  });
});
