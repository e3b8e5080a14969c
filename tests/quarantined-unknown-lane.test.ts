import { afterAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import {
  drillForFile,
  drillPassphrase,
  laneCards,
  op,
  postMarker,
  quarantineWithPendingCard,
  waitFor,
} from './support/drill.js';
import { DrillAgent } from './support/drill-agent.js';
import { decideAsPerson } from './support/person-decision.js';

/**
 * DESIGN §4 for an unknown a quarantined journal's recovery records before any DISPATCH_STARTED: it blocks its lane
 * like any unknown head. A real daemon stops while A waits on its card; its integrity anchor is then edited, so the
 * next start is quarantined and recovery records A unknown (broker_restart_journal_quarantined), not not_attempted.
 * After a person re-adopts the journal, B — the next ticket of A's lane, approved — waits "blocked by #A"; nothing of
 * B reaches the remote until a person abandons A over the operator API, and then B is sent.
 */
const theDrill = drillForFile('pqlane-', 'lane', 120);
const lane = 'doc-quarantined';
const passphrase = drillPassphrase;
let p3: DrillAgent | undefined;

// Registered after the drill's: runs before the drill closes.
afterAll(async () => {
  await p3?.stop();
}, 30_000);

const post = (agent: DrillAgent, marker: string) => postMarker(agent, 'quarantined', marker);

describe("when a quarantined journal's recovery leaves the head of a lane unknown before dispatch", () => {
  it('the next ticket of the lane waits for it, and is sent only after a person abandons it', async () => {
    const d = theDrill();
    // A waits on its card when the daemon stops; the next start, quarantined, leaves it unknown before dispatch.
    const a = await quarantineWithPendingCard(d, lane, 'quarantined', passphrase);
    expect(await op(d.dataDir, 'integrity.anchor', {})).toMatchObject({ state: 'quarantined', code: 'ANCHOR_FORGED' });
    expect((await op(d.dataDir, 'actions.show', { action_id: a.action_id })).state).toMatchObject({
      dispatch_seq: null,
      outcome: 'unknown',
      outcome_basis: 'broker_restart_journal_quarantined',
      abandoned: false,
    });
    // It heads its lane as a blocked head, with its card.
    expect(await laneCards(d.dataDir, lane)).toMatchObject([{ ticket: a.ticket, state: 'blocked_head' }]);

    // Agents' calls are refused while quarantined: a person re-adopts the journal as it is.
    await decideAsPerson(d.dataDir, passphrase, 'integrity.readopt', { code: 'ANCHOR_FORGED' });
    p3 = await DrillAgent.start(d.dataDir, 'lane-p3');
    const sessions = await waitFor(
      () => op(d.dataDir, 'sessions.list', {}),
      (r) => r.sessions.some((s) => s.status === 'pending' && s.connected),
      'the new agent session, pending',
    );
    for (const s of sessions.sessions.filter((x) => x.status === 'pending' && x.connected))
      await op(d.dataDir, 'sessions.approve', { session_id: s.session_id });
    const answerB = post(p3, 'B');
    const cards = await waitFor(
      () => laneCards(d.dataDir, lane),
      (c) => c.length === 2 && c[1]?.state === 'pending',
      'B pending behind A',
    );
    const b = cards[1] as ApprovalCard;
    await op(d.dataDir, 'approvals.approve', { ticket: b.ticket });

    // Approved, B is not released as if A had failed: it waits for A, and nothing of it was sent.
    const waiting = (await laneCards(d.dataDir, lane)).find((c) => c.ticket === b.ticket);
    expect(waiting).toMatchObject({
      state: 'approved_waiting',
      waiting_for_ticket: a.ticket,
      text: `approved, blocked by #${a.ticket} (outcome unknown)`,
    });
    const shownB = await op(d.dataDir, 'actions.show', { action_id: b.action_id });
    expect(shownB.queue).toMatchObject({ waiting: 'lane_blocked', waiting_for_ticket: a.ticket });
    expect(shownB.events.map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
    expect(d.log.markers()).toEqual([]);

    // A person abandons A over the operator API: the lane moves on, and B is sent.
    const abandoned = await decideAsPerson(d.dataDir, passphrase, 'approvals.abandon', {
      ticket: a.ticket,
      reason: 'cannot tell whether it was sent',
    });
    expect(abandoned).toMatchObject({ action_id: a.action_id, decision: 'abandoned' });
    const sent = await answerB;
    expect(sent.reply?.isError ?? false).toBe(false);
    expect(d.log.markers()).toEqual(['B']);
    expect((await op(d.dataDir, 'actions.show', { action_id: a.action_id })).state).toMatchObject({
      outcome: 'unknown',
      abandoned: true,
    });
  }, 90_000);
});
