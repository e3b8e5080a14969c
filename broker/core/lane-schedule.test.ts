import { describe, expect, it } from 'vitest';
import type { ActionState, ApprovalMode, Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { classifyOutcome } from './classify-outcome.js';
import { scheduleLane, ticketStanding } from './lane-schedule.js';
import { applyEvent } from './project.js';

const fp = `sha256:${'a'.repeat(64)}`;
const person = { kind: 'person' as const, id: 'operator' };
const closedBy = (gate: 'approval_denied' | 'approval_expired'): Classification =>
  classifyOutcome({
    channel: 'http',
    gate: { kind: gate },
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
const unknown: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'REMOTE_OUTCOME_UNKNOWN',
  effect: 'unknown_effect',
  outcome_basis: 'test',
  source: 'transport_observed',
};
const committed: Classification = {
  phase: 'remote_execution',
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
};

type Step = 'approve' | 'reject' | 'expire' | 'cancel' | 'dispatch' | 'unknown' | 'commit' | 'abandon';

/** One action of lane L folded through the real projection, step by step. */
function ticket(n: number, approval: ApprovalMode, steps: Step[] = []): ActionState {
  let seq = n * 100;
  const id = `act_ticket${String(n).padStart(4, '0')}`;
  let state: ActionState | undefined;
  const add = (e: NewEvent): void => {
    seq += 1;
    state = applyEvent(state, {
      session_id: 'ses_abcdef',
      ticket: n,
      lane: 'L',
      ...e,
      seq,
      at_ms: seq,
    } as JournalEvent);
  };
  add({
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    payload: { channel: 'http', target: 'route:r POST /x', request_fingerprint: fp, approval, idempotent: false },
  });
  add({ kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} });
  for (const step of steps) {
    if (step === 'approve')
      add({ kind: 'APPROVED', action_id: id, payload: { actor: person, request_fingerprint: fp } });
    if (step === 'reject')
      add({
        kind: 'REJECTED',
        action_id: id,
        payload: { actor: person, reason: 'no' },
        classification: closedBy('approval_denied'),
      });
    if (step === 'expire')
      add({ kind: 'EXPIRED', action_id: id, payload: {}, classification: closedBy('approval_expired') });
    if (step === 'cancel')
      add({
        kind: 'CANCELLED',
        action_id: id,
        payload: { actor: person, reason: 'no' },
        classification: closedBy('approval_denied'),
      });
    if (step === 'dispatch') {
      add({
        kind: 'CREDENTIAL_AUTHORIZED',
        action_id: id,
        payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
      });
      add({ kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } });
    }
    if (step === 'unknown')
      add({ kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: 1 }, classification: unknown });
    if (step === 'commit')
      add({
        kind: 'RESULT_COMMITTED',
        action_id: id,
        payload: { attempt: 1, result_id: 'r', result_digest: fp },
        classification: committed,
      });
    if (step === 'abandon')
      add({ kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'checked by hand' } });
  }
  if (state === undefined) throw new Error('unreachable');
  return state;
}

describe('ticketStanding', () => {
  it.each<[string, ActionState, ReturnType<typeof ticketStanding>]>([
    ['waiting for a decision', ticket(1, 'per_call'), 'open_before_dispatch'],
    ['approved, not dispatched', ticket(1, 'per_call', ['approve']), 'open_before_dispatch'],
    ['rejected', ticket(1, 'per_call', ['reject']), 'resolved'],
    ['expired', ticket(1, 'per_call', ['expire']), 'resolved'],
    ['cancelled after approval', ticket(1, 'per_call', ['approve', 'cancel']), 'resolved'],
    ['dispatched, nothing recorded', ticket(1, 'none', ['dispatch']), 'in_flight'],
    ['dispatched, committed', ticket(1, 'none', ['dispatch', 'commit']), 'resolved'],
    ['dispatched, unknown', ticket(1, 'none', ['dispatch', 'unknown']), 'blocked'],
    ['unknown, then abandoned', ticket(1, 'none', ['dispatch', 'unknown', 'abandon']), 'resolved'],
    ['unknown, then settled by later evidence', ticket(1, 'none', ['dispatch', 'unknown', 'commit']), 'resolved'],
  ])('when the ticket is %s', (_name, state, standing) => {
    expect(ticketStanding(state)).toBe(standing);
  });
});

describe('scheduleLane', () => {
  it('when B is approved first, nothing is released and B says it waits for A', () => {
    const s = scheduleLane([ticket(1, 'per_call'), ticket(2, 'per_call', ['approve'])]);
    expect(s.release).toBeNull();
    expect(s.open.map((w) => [w.ticket, w.waiting, w.waiting_for_ticket, w.text])).toEqual([
      [1, 'approval', null, 'waiting for approval'],
      [2, 'lane', 1, 'approved, waiting for #1'],
    ]);
  });

  it('when A is approved too, A is released (and only A)', () => {
    const s = scheduleLane([ticket(1, 'per_call', ['approve']), ticket(2, 'per_call', ['approve'])]);
    expect(s.release?.ticket).toBe(1);
    expect(s.open[0]?.waiting).toBe('dispatching');
  });

  it.each<[string, Step[]]>([
    ['rejected', ['reject']],
    ['expired', ['expire']],
    ['cancelled', ['cancel']],
    ['committed', ['approve', 'dispatch', 'commit']],
    ['abandoned', ['approve', 'dispatch', 'unknown', 'abandon']],
  ])('when the head is %s, the next allowed ticket is released', (_name, steps) => {
    const s = scheduleLane([ticket(1, 'per_call', steps), ticket(2, 'per_call', ['approve'])]);
    expect(s.release?.ticket).toBe(2);
    expect(s.headTicket).toBe(2);
  });

  it('when the head is dispatched and unrecorded, the lane stays busy', () => {
    const s = scheduleLane([ticket(1, 'none', ['dispatch']), ticket(2, 'none')]);
    expect(s.release).toBeNull();
    expect(s.open.map((w) => w.waiting)).toEqual(['dispatching', 'lane']);
    expect(s.open[1]?.text).toBe('waiting for #1');
  });

  it('when the head is unknown, later tickets are blocked by it, approved or not', () => {
    const s = scheduleLane([
      ticket(1, 'none', ['dispatch', 'unknown']),
      ticket(2, 'per_call', ['approve']),
      ticket(3, 'per_call'),
    ]);
    expect(s.release).toBeNull();
    expect(s.open.map((w) => [w.ticket, w.waiting, w.waiting_for_ticket])).toEqual([
      [1, 'blocked_head', null],
      [2, 'lane_blocked', 1],
      [3, 'lane_blocked', 1],
    ]);
    expect(s.open[1]?.text).toBe('approved, blocked by #1 (outcome unknown)');
    expect(s.open[2]?.text).toBe('waiting for approval; blocked by #1 (outcome unknown)');
  });

  it('when a cancelled approved ticket sits between, it is skipped and never released', () => {
    const lane = [
      ticket(1, 'per_call', ['approve', 'dispatch', 'commit']),
      ticket(2, 'per_call', ['approve', 'cancel']),
      ticket(3, 'none'),
    ];
    const s = scheduleLane(lane);
    expect(s.release?.ticket).toBe(3);
    expect(s.open.map((w) => w.ticket)).toEqual([3]);
  });

  it('when a session-mode call waits, it says so and waits for the previous open ticket', () => {
    const s = scheduleLane([ticket(1, 'session'), ticket(2, 'per_call'), ticket(3, 'session')]);
    expect(s.open.map((w) => [w.waiting, w.text])).toEqual([
      ['session_approval', 'waiting for session approval'],
      ['approval', 'waiting for approval (behind #1)'],
      ['session_approval', 'waiting for session approval (behind #2)'],
    ]);
  });

  it('when the session is approved but its grant ran out, an undecided session-mode call waits for a per-call approval', () => {
    const s = scheduleLane([ticket(1, 'session')], () => false);
    expect(s.open.map((w) => [w.waiting, w.text])).toEqual([['approval', 'waiting for approval']]);
  });

  it('when every ticket is resolved, the lane is empty', () => {
    expect(scheduleLane([ticket(1, 'per_call', ['reject'])])).toEqual({ release: null, open: [], headTicket: null });
  });

  it('refuses tickets out of order (a programmer error)', () => {
    expect(() => scheduleLane([ticket(2, 'none'), ticket(1, 'none')])).toThrow(RangeError);
  });
});

describe('scheduleLane with a running executor', () => {
  it('a released ticket whose record reads resolved keeps the lane while its executor runs (a retry’s backoff), not after', () => {
    const head = ticket(1, 'none', ['dispatch', 'commit']);
    const next = ticket(2, 'none');
    const running = scheduleLane(
      [head, next],
      () => true,
      (s) => s.action_id === head.action_id,
    );
    expect(running.release).toBeNull();
    expect(running.headTicket).toBe(1);
    expect(running.open).toEqual([
      expect.objectContaining({
        ticket: 1,
        waiting: 'dispatching',
        text: '#1 retrying: its last attempt asked for a backoff',
      }),
      expect.objectContaining({ ticket: 2, waiting: 'lane', waiting_for_ticket: 1, text: 'waiting for #1' }),
    ]);
    const done = scheduleLane([head, next]);
    expect(done.release).toEqual({ action_id: next.action_id, ticket: 2 });
    expect(done.headTicket).toBe(2);
  });

  it('running changes nothing for a ticket the record already keeps open or blocked', () => {
    const blocked = ticket(1, 'none', ['dispatch', 'unknown']);
    const next = ticket(2, 'none');
    const all = (): boolean => true;
    expect(scheduleLane([blocked, next], all, all)).toEqual(scheduleLane([blocked, next], all));
  });
});
