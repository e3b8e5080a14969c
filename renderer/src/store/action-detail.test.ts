import { describe, expect, it } from 'vitest';
import {
  actionDetailReducer,
  chronologyOf,
  entrySource,
  initialActionDetailView,
  releaseLine,
  threeOrdersOf,
  waitLines,
  type ActionDetail,
} from './action-detail.js';
import { spanText } from './action-wait.js';
import { activityRowsOf, shownAction } from './test-cards.js';

const id = 'act_lost_000001';
const row = activityRowsOf(id, { ticket: 4, lane: 'doc-7' });

/** An approved write whose response was lost (unknown) and which a reconciliation later settled, interleaved with other actions' seqs. */
function lostThenReconciled(): ActionDetail {
  const events = [
    row(10, 'ACTION_ACCEPTED', 'http route:docs (approval per_call)'),
    row(11, 'PREFLIGHT_VALIDATED'),
    row(14, 'CARD_SHOWN', 'expires at …'),
    row(20, 'APPROVED', 'by person:operator-1'),
    row(21, 'CREDENTIAL_AUTHORIZED'),
    row(22, 'DISPATCH_STARTED', 'attempt 1 on a fresh connection'),
    row(23, 'REQUEST_SENT'),
    row(25, 'CONNECTION_LOST'),
    row(26, 'OUTCOME_RECORDED', 'remote_execution / unknown (CONNECTION_LOST_AFTER_SEND)', 'unknown'),
    row(
      40,
      'RECONCILIATION_RESULT',
      'by lookup act_look_0001 (idempotency_token): committed, lookup_found',
      'committed',
    ),
  ];
  const detail = shownAction(
    { ticket: 4, first_seq: 10, dispatch_seq: 22, outcome: 'committed' },
    [...events].reverse(),
  );
  return { ...detail, released_by: { kind: 'reconciliation', seq: 40, outcome: 'committed', source: 'remote_query' } };
}

describe('the action detail', () => {
  it("orders the chronology by seq (never wall time) and marks the person's and the reconciliation's entries", () => {
    const entries = chronologyOf(lostThenReconciled());
    expect(entries.map((e) => e.seq)).toEqual([10, 11, 14, 20, 21, 22, 23, 25, 26, 40]);
    expect(entries.find((e) => e.kind === 'APPROVED')?.source).toBe('operator');
    expect(entries.find((e) => e.kind === 'RECONCILIATION_RESULT')).toMatchObject({
      source: 'reconciliation',
      releasedLane: true,
    });
    expect(entries.filter((e) => e.releasedLane)).toHaveLength(1);
    expect(entries.find((e) => e.kind === 'CONNECTION_LOST')?.source).toBe('transport');
  });

  it('keeps the three orders apart: ticket and card, dispatch, completion by the settling event', () => {
    expect(threeOrdersOf(lostThenReconciled())).toEqual({
      card: { ticket: 4, cardSeq: 14, acceptedSeq: 10 },
      dispatch: { seqs: [22] },
      completion: { seq: 40, kind: 'RECONCILIATION_RESULT', outcome: 'committed' },
    });
  });

  it('says "not complete" while nothing classified the action, and "never dispatched" before the boundary', () => {
    const open = shownAction({ ticket: 9, first_seq: 3, dispatch_seq: null, outcome: null }, [
      row(3, 'ACTION_ACCEPTED'),
      row(4, 'CARD_SHOWN'),
    ]);
    expect(threeOrdersOf(open)).toEqual({
      card: { ticket: 9, cardSeq: 4, acceptedSeq: 3 },
      dispatch: { seqs: [] },
      completion: { seq: null, kind: null, outcome: null },
    });
  });

  it.each([
    ['APPROVED', 'by policy:session-approval', 'policy'],
    ['CANCELLED', 'by agent:ses_1: caller cancelled', 'agent'],
    ['REJECTED', 'by person:alice: no', 'operator'],
    ['OPERATOR_ATTESTED', 'by person:alice: checked', 'operator'],
    ['ABANDONED', 'by person:alice: gone', 'operator'],
    ['EXIT_STATUS', 'exit status 0', 'remote'],
    ['CALLER_DISCONNECTED', '', 'agent'],
    ['RESULT_COMMITTED', '', 'broker'],
  ] as const)('marks %s "%s" as %s', (kind, summary, source) => {
    expect(entrySource({ kind, summary })).toBe(source);
  });

  it('says what released the lane, by whom', () => {
    expect(
      releaseLine({ kind: 'abandoned', seq: 51, actor: { kind: 'person', id: 'alice' }, outcome: 'unknown' }),
    ).toBe(
      'Lane released at seq 51: a person abandoned it (the outcome stays as it was) by person:alice; outcome unknown.',
    );
  });

  it('says how the person who released the lane was proven (issue 14: every decision shows its surface)', () => {
    const actor = { kind: 'person', id: 'alice', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
    expect(releaseLine({ kind: 'operator_attested', seq: 60, actor, outcome: 'committed' })).toBe(
      'Lane released at seq 60: a person attested the outcome by person:alice (cli, passphrase on tty); outcome committed.',
    );
    const process = {
      kind: 'process',
      id: '/usr/bin/node pid 42',
      surface: 'cli',
      auth: 'unattended_opt_out',
    } as const;
    expect(releaseLine({ kind: 'abandoned', seq: 61, actor: process, outcome: 'unknown' })).toContain(
      'by process:/usr/bin/node pid 42 (cli, unattended);',
    );
  });

  it('drops a reply for an action no longer shown', () => {
    const a = actionDetailReducer(initialActionDetailView, { type: 'opened', actionId: 'act_a' });
    const b = actionDetailReducer(actionDetailReducer(a, { type: 'requested' }), { type: 'opened', actionId: 'act_b' });
    expect(
      actionDetailReducer(b, { type: 'received', actionId: 'act_a', reply: { ok: true, value: lostThenReconciled() } })
        .detail,
    ).toBeNull();
    expect(
      actionDetailReducer(b, { type: 'received', actionId: 'act_b', reply: { ok: true, value: lostThenReconciled() } })
        .phase,
    ).toBe('ready');
  });
});

describe('what an action waited for in its lane', () => {
  it('says each earlier ticket with the wait, longest first, ongoing ones as still waiting', () => {
    const waits = [
      { ticket: 3, action_id: 'act_3', waited_ms: 2_000, ongoing: false },
      { ticket: 4, action_id: 'act_4', waited_ms: 41_200, ongoing: false },
    ];
    expect(waitLines(5, waits)).toEqual(['#5 waited 41 s for #4', '#5 waited 2 s for #3']);
    expect(waitLines(5, [{ ticket: 4, action_id: 'act_4', waited_ms: 12_000, ongoing: true }])).toEqual([
      '#5 waiting for #4 for 12 s',
    ]);
    expect(waitLines(5, [])).toEqual([]);
  });

  it.each([
    [0, '0 ms'],
    [850, '850 ms'],
    [41_000, '41 s'],
    [59_400, '59 s'],
    [60_000, '1 min'],
    [245_000, '4 min 5 s'],
    [3_600_000, '1 h'],
    [7_380_000, '2 h 3 min'],
    [-5, '0 ms'],
  ])('words a span of %i ms as %s', (ms, text) => {
    expect(spanText(ms)).toBe(text);
  });
});
