import { describe, expect, it } from 'vitest';
import {
  CodedError,
  members,
  restartJournalQuarantinedBasis,
  transitionRefusalOf,
  TransitionRefusalKind,
  TransitionRefused,
  type Classification,
  type JournalEvent,
  type NewEvent,
  type TransitionRefusal,
} from '../contract/index.js';
import { classifyOutcome } from './classify-outcome.js';
import { applyEvent, foldEvent, project } from './project.js';
import { applySessionEvent, foldSessionEvent } from './project-session.js';

/**
 * Every refusal kind the projection reports for a lost race, each from the smallest history that
 * reaches it, with the code and message the refused append has always answered with; and the
 * bugs (no race explains them) that still throw IMPOSSIBLE_TRANSITION and are never a refusal.
 */
const fp = `sha256:${'f'.repeat(64)}`;
const id = 'act_refusal_0001';
const person = { kind: 'person' as const, id: 'ann' };
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
  ...unknown,
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
};
const gateOf = (kind: 'operator_cancelled' | 'approval_denied'): Classification =>
  classifyOutcome({
    channel: 'http',
    gate: { kind },
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
const gate = gateOf('operator_cancelled');
const attested: Classification = { ...committed, source: 'operator_attested', outcome_basis: 'operator_attested' };

const accepted = (approval: 'none' | 'per_call' = 'per_call'): NewEvent => ({
  kind: 'ACTION_ACCEPTED',
  action_id: id,
  payload: {
    channel: 'http',
    target: 'route:docs POST /x',
    request_fingerprint: fp,
    approval,
    idempotent: false,
    retry_budget: 3,
  },
});
const validated: NewEvent = { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} };
const card: NewEvent = { kind: 'CARD_SHOWN', action_id: id, payload: { expires_at_ms: 9_999 } };
const approved: NewEvent = { kind: 'APPROVED', action_id: id, payload: { actor: person, request_fingerprint: fp } };
const rejected: NewEvent = {
  kind: 'REJECTED',
  action_id: id,
  payload: { actor: person, reason: 'no' },
  classification: gateOf('approval_denied'),
};
const cancelled: NewEvent = {
  kind: 'CANCELLED',
  action_id: id,
  payload: { actor: person, reason: 'stop' },
  classification: gate,
};
const authorized: NewEvent = {
  kind: 'CREDENTIAL_AUTHORIZED',
  action_id: id,
  payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
};
const dispatch = (attempt: number, generation?: number): NewEvent => ({
  kind: 'DISPATCH_STARTED',
  action_id: id,
  payload: { attempt, connection: 'fresh', ...(generation === undefined ? {} : { generation }) },
});
const recorded = (attempt: number, classification: Classification = unknown): NewEvent => ({
  kind: 'OUTCOME_RECORDED',
  action_id: id,
  payload: { attempt },
  classification,
});
const abandoned: NewEvent = { kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'gave up' } };
const attest: NewEvent = {
  kind: 'OPERATOR_ATTESTED',
  action_id: id,
  payload: { actor: person, basis: 'saw it' },
  classification: attested,
};
const lease = (generation: number, expires = 9_000): NewEvent => ({
  kind: 'RETRY_LEASED',
  action_id: id,
  payload: {
    generation,
    holder: `w${generation}`,
    expires_at_ms: expires,
    decision: 'RETRY_NEW_ATTEMPT',
    requested_by: { kind: 'broker', id: 'retry-engine' },
  },
});
const lookup: NewEvent = {
  kind: 'RECONCILIATION_RESULT',
  action_id: id,
  payload: { correlation: 'idempotency_token', lookup_action_id: 'act_lookup_000001', attempts_seen: 1 },
  classification: { ...committed, outcome_basis: 'remote_operation_lookup', source: 'remote_query' },
};
/** What recovery records for an open action when the start found the journal quarantined (classify-restart.ts). */
const quarantinedRecovery: NewEvent = {
  kind: 'OUTCOME_RECORDED',
  action_id: id,
  payload: {},
  classification: {
    phase: 'credential_injection',
    outcome: 'unknown',
    retry: 'reconcile',
    code: 'BROKER_RESTARTED',
    effect: 'unknown_effect',
    outcome_basis: restartJournalQuarantinedBasis,
    source: 'local_gate',
  },
};
const unknownHead: NewEvent[] = [accepted('none'), validated, authorized, dispatch(1), recorded(1)];

interface Case {
  readonly when: string;
  readonly history: readonly NewEvent[];
  readonly event: NewEvent;
  readonly atMs?: number;
  readonly kind: TransitionRefusalKind;
  readonly code?: TransitionRefusal['code'];
  readonly why: string;
}

const committedResult = (attempt: number, resultId: string, classification: Classification): NewEvent => ({
  kind: 'RESULT_COMMITTED',
  action_id: id,
  payload: { attempt, result_id: resultId, result_digest: fp },
  classification,
});
const delivered = (resultId: string): NewEvent => ({
  kind: 'RESULT_DELIVERED',
  action_id: id,
  payload: { result_id: resultId },
});
const throttled: Classification = {
  ...committed,
  outcome: 'rejected',
  retry: 'backoff',
  code: 'REMOTE_THROTTLED',
  effect: 'rejected',
  outcome_basis: 'throttled',
};
/** A 429 committed as attempt 1's result, then the retry engine's attempt 2 dispatched under its lease. */
const throttledThenRetried: NewEvent[] = [
  accepted('none'),
  validated,
  authorized,
  dispatch(1),
  committedResult(1, 'res_first', throttled),
  lease(1),
  authorized,
  dispatch(2, 1),
];
const undecided = [accepted(), validated];
/** What recovery records for a card a previous run left waiting (recovery.ts: an OUTCOME_RECORDED, no attempt). */
const restartClosed: NewEvent = {
  kind: 'OUTCOME_RECORDED',
  action_id: id,
  payload: {},
  classification: {
    phase: 'credential_injection',
    outcome: 'not_attempted',
    retry: 'backoff',
    code: 'BROKER_RESTARTED',
    effect: 'no_effect',
    outcome_basis: 'broker_restart_before_dispatch',
    source: 'local_gate',
  },
};
const lockedOut: NewEvent = {
  kind: 'OUTCOME_RECORDED',
  action_id: id,
  payload: {},
  classification: { ...gateOf('operator_cancelled'), code: 'VAULT_LOCKED', outcome_basis: 'vault_locked' },
};
const direct = [accepted('none'), validated];
const inFlight = [...direct, authorized, dispatch(1)];
const settled = [...inFlight, recorded(1, committed)];
const retried = [...unknownHead, lease(1), dispatch(2, 1), recorded(2)];
const settledWhy = 'only an action whose recorded outcome is unknown can be abandoned';

const cases: readonly Case[] = [
  {
    when: 'a second person approves',
    history: [...undecided, card, approved],
    event: approved,
    kind: 'already_decided',
    why: 'a second decision after approved',
  },
  {
    when: 'a rejection follows a rejection',
    history: [...undecided, card, rejected],
    event: rejected,
    kind: 'already_decided',
    why: 'a second terminal decision after rejected',
  },
  {
    when: 'a cancellation meets DISPATCH_STARTED',
    history: inFlight,
    event: cancelled,
    kind: 'already_dispatched',
    why: 'CANCELLED after DISPATCH_STARTED',
  },
  {
    when: 'a not_attempted record meets DISPATCH_STARTED',
    history: inFlight,
    event: recorded(1, gate),
    kind: 'already_dispatched',
    why: 'not_attempted after DISPATCH_STARTED',
  },
  {
    when: 'the credential is authorized after a cancellation',
    history: [...undecided, card, approved, cancelled],
    event: authorized,
    kind: 'closed',
    why: 'CREDENTIAL_AUTHORIZED after the ticket was cancelled',
  },
  {
    when: 'a person rejects a card a restart already closed',
    history: [...undecided, card, restartClosed],
    event: rejected,
    kind: 'closed',
    why: 'REJECTED after the ticket was closed (BROKER_RESTARTED)',
  },
  {
    when: 'a person cancels a card a restart already closed',
    history: [...undecided, card, restartClosed],
    event: cancelled,
    kind: 'closed',
    why: 'CANCELLED after the ticket was closed (BROKER_RESTARTED)',
  },
  {
    when: 'an approved ticket closed by a credential gate is cancelled',
    history: [...direct, approved, lockedOut],
    event: cancelled,
    kind: 'closed',
    why: 'CANCELLED after the ticket was closed (VAULT_LOCKED)',
  },
  {
    when: 'a card is shown after a cancellation',
    history: [...undecided, cancelled],
    event: card,
    kind: 'closed',
    why: 'CARD_SHOWN after the ticket was cancelled',
  },
  {
    when: 'an approval arrives before preflight',
    history: [accepted()],
    event: approved,
    kind: 'wrong_stage',
    why: 'approval needs a validated action (stage accepted)',
  },
  {
    when: 'an undispatched action is abandoned',
    history: direct,
    event: abandoned,
    kind: 'not_dispatched',
    why: settledWhy,
  },
  {
    when: 'an undispatched action is attested',
    history: direct,
    event: attest,
    kind: 'not_dispatched',
    why: 'OPERATOR_ATTESTED settles only a dispatched action or a recorded unknown',
  },
  {
    when: 'an attempt in flight is attested',
    history: inFlight,
    event: attest,
    kind: 'attempt_in_flight',
    why: 'OPERATOR_ATTESTED while attempt 1 has no recorded outcome',
  },
  {
    when: 'an attempt in flight is abandoned',
    history: inFlight,
    event: abandoned,
    kind: 'attempt_in_flight',
    why: settledWhy,
  },
  {
    when: 'a stalled worker reuses a taken attempt number',
    history: retried,
    event: dispatch(2, 1),
    kind: 'attempt_taken',
    why: 'attempt 2 after 2 attempts',
  },
  {
    when: 'an attestation meets a committed result',
    history: settled,
    event: attest,
    kind: 'settled',
    why: 'committed → committed: the action was already settled',
  },
  { when: 'a settled head is abandoned', history: settled, event: abandoned, kind: 'settled', why: settledWhy },
  {
    when: 'a head is abandoned twice',
    history: [...unknownHead, abandoned],
    event: abandoned,
    kind: 'abandoned',
    why: 'the action was already abandoned',
  },
  {
    when: 'an abandoned head is dispatched again',
    history: [...unknownHead, abandoned],
    event: dispatch(2),
    kind: 'abandoned',
    why: 'DISPATCH_STARTED after a person abandoned it',
  },
  {
    when: 'a retry lease meets a committed result',
    history: settled,
    event: lease(1),
    kind: 'not_retriable',
    why: 'a retry lease needs a recorded unknown after dispatch or a backoff outcome (outcome committed, recorded true, dispatched true)',
  },
  {
    when: "a retry lease meets an unknown never dispatched (a quarantined journal's recovery)",
    history: [...direct, authorized, quarantinedRecovery],
    event: lease(1),
    kind: 'not_retriable',
    why: 'a retry lease needs a recorded unknown after dispatch or a backoff outcome (outcome unknown, recorded true, dispatched false)',
  },
  {
    when: "a retry lease meets another worker's live lease",
    history: [...unknownHead, lease(1)],
    event: lease(2),
    kind: 'lease_held',
    code: 'LEASE_LOST',
    why: 'generation 1 is held by w1 until 1970-01-01T00:00:09.000Z',
  },
  {
    when: 'a retry lease skips a generation',
    history: unknownHead,
    event: lease(2),
    kind: 'lease_lost',
    code: 'LEASE_LOST',
    why: 'generation 2 is not the next (1)',
  },
  {
    when: 'a dispatch lands after its lease expired',
    history: [...unknownHead, lease(1, 1_007)],
    event: dispatch(2, 1),
    atMs: 2_000,
    kind: 'lease_lost',
    code: 'LEASE_LOST',
    why: 'generation 1 is not the live lease (generation 1, expires 1970-01-01T00:00:01.007Z)',
  },
  {
    when: 'an attestation meets a live lease',
    history: [...unknownHead, lease(1)],
    event: attest,
    kind: 'lease_held',
    why: 'OPERATOR_ATTESTED while retry generation 1 holds a live lease',
  },
  {
    when: "an earlier attempt's result is acknowledged while a retry is in flight",
    history: throttledThenRetried,
    event: delivered('res_first'),
    kind: 'wrong_stage',
    why: "RESULT_DELIVERED of res_first, not the action's current committed result",
  },
  {
    when: "an earlier attempt's result is acknowledged after the retry committed its own",
    history: [...throttledThenRetried, committedResult(2, 'res_second', committed)],
    event: delivered('res_first'),
    kind: 'wrong_stage',
    why: "RESULT_DELIVERED of res_first, not the action's current committed result",
  },
  {
    when: 'a retry dispatches without a lease',
    history: unknownHead,
    event: dispatch(2),
    kind: 'no_lease',
    why: 'a retry after a recorded outcome needs a retry lease (RETRY_LEASED)',
  },
  {
    when: 'a lookup that started before the latest attempt answers',
    history: retried,
    event: lookup,
    kind: 'stale_lookup',
    why: 'the lookup started after attempt 1, but attempt 2 ran since: its answer is stale',
  },
];

function stamp(events: readonly NewEvent[], from = 1): JournalEvent[] {
  return events.map(
    (e, i) =>
      ({ session_id: null, ticket: 1, lane: 'lane-a', ...e, seq: from + i, at_ms: 1_000 + from + i }) as JournalEvent,
  );
}

function refusalOf(c: Case): ReturnType<typeof foldEvent> {
  const state = project(stamp(c.history)).get(id);
  const [event] = stamp([c.event], c.history.length + 1);
  if (event === undefined) throw new Error('no event');
  return foldEvent(state, c.atMs === undefined ? event : { ...event, at_ms: c.atMs });
}

describe('when recovery in a quarantined journal recorded an unknown before dispatch, it is left like any unknown', () => {
  const recovered = [...direct, authorized, quarantinedRecovery];
  const after = (event: NewEvent) => project(stamp([...recovered, event])).get(id);

  it.each([
    ['a person attests it', attest, 'operator_attested'],
    ['a lookup settles it', { ...lookup, payload: { ...lookup.payload, attempts_seen: 0 } }, 'remote_query'],
  ] as const)('%s: settled, still with no DISPATCH_STARTED', (_when, event, source) => {
    expect(after(event)).toMatchObject({ dispatch_seq: null, outcome: 'committed', source, recorded: true });
  });

  it('a person abandons it: still unknown, abandoned, never retried', () => {
    expect(after(abandoned)).toMatchObject({ dispatch_seq: null, outcome: 'unknown', abandoned: true });
    const state = project(stamp([...recovered, abandoned])).get(id);
    const [retry] = stamp([lease(1)], recovered.length + 2);
    expect(foldEvent(state, retry as JournalEvent)).toMatchObject({ ok: false, refusal: { kind: 'not_retriable' } });
  });

  it('once settled it is settled: a second attestation loses as settled', () => {
    const state = project(stamp([...recovered, attest])).get(id);
    const [again] = stamp([attest], recovered.length + 2);
    expect(foldEvent(state, again as JournalEvent)).toMatchObject({ ok: false, refusal: { kind: 'settled' } });
  });
});

describe('the projection refuses a lost race as a value', () => {
  it.each(cases)('when $when: $kind', (c) => {
    const seq = c.history.length + 1;
    expect(refusalOf(c)).toEqual({
      ok: false,
      refusal: {
        kind: c.kind,
        code: c.code ?? 'IMPOSSIBLE_TRANSITION',
        message: `seq ${seq} ${c.event.kind} on ${id}: ${c.why}`,
      },
    });
  });

  it("when the current result is acknowledged, it is delivered — the retry's, once it committed its own", () => {
    const history = [...throttledThenRetried, committedResult(2, 'res_second', committed), delivered('res_second')];
    expect(project(stamp(history)).get(id)).toMatchObject({ result_id: 'res_second', stage: 'result_delivered' });
    // Before the retry the first result was the current one: its acknowledgement then stands.
    const first = [...throttledThenRetried.slice(0, 5), delivered('res_first')];
    expect(project(stamp(first)).get(id)).toMatchObject({ result_id: 'res_first', stage: 'result_delivered' });
  });

  it('when the same event is applied outside the journal (a replay), it throws the refusal with the same code and message', () => {
    const c = cases[0];
    if (c === undefined) throw new Error('no case');
    const folded = refusalOf(c);
    if (folded.ok) throw new Error('expected a refusal');
    const state = project(stamp(c.history)).get(id);
    const [event] = stamp([c.event], c.history.length + 1);
    let thrown: unknown;
    try {
      applyEvent(state, event as JournalEvent);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TransitionRefused);
    expect(thrown).toMatchObject({ code: folded.refusal.code, message: folded.refusal.message });
    expect(transitionRefusalOf(thrown)).toEqual(folded.refusal);
  });

  it('when a fold is accepted, it returns the state applyEvent returns', () => {
    const [event] = stamp([approved], 4);
    const state = project(stamp([accepted(), validated, card])).get(id);
    expect(foldEvent(state, event as JournalEvent)).toEqual({
      ok: true,
      state: applyEvent(state, event as JournalEvent),
    });
  });

  it('every action refusal kind has a case here (the session kinds are below)', () => {
    const covered = new Set(cases.map((c) => c.kind));
    const actionKinds = members(TransitionRefusalKind).filter((k) => !k.startsWith('session_'));
    expect(actionKinds.filter((k) => !covered.has(k))).toEqual([]);
  });
});

describe('an event no race explains is a bug: it throws IMPOSSIBLE_TRANSITION, never a refusal', () => {
  const otherFingerprint = {
    ...approved,
    payload: { actor: person, request_fingerprint: `sha256:${'0'.repeat(64)}` },
  } as NewEvent;
  const delivered: NewEvent = { kind: 'RESULT_DELIVERED', action_id: id, payload: {} };
  const bugs: ReadonlyArray<{ when: string; history: readonly NewEvent[]; event: NewEvent; why: RegExp }> = [
    { when: 'the first event is not ACTION_ACCEPTED', history: [], event: validated, why: /must be ACTION_ACCEPTED/ },
    { when: 'an action is accepted twice', history: [accepted()], event: accepted(), why: /accepted once/ },
    {
      when: 'the approval names another fingerprint',
      history: [...undecided, card],
      event: otherFingerprint,
      why: /different fingerprint/,
    },
    {
      when: 'a credential is authorized without approval',
      history: [...undecided, card],
      event: authorized,
      why: /only after approval/,
    },
    {
      when: 'a result is delivered that was never committed',
      history: direct,
      event: delivered,
      why: /needs a committed result/,
    },
    {
      when: 'DISPATCH_STARTED precedes CREDENTIAL_AUTHORIZED',
      history: direct,
      event: dispatch(1),
      why: /before CREDENTIAL_AUTHORIZED/,
    },
    {
      when: 'an unknown before DISPATCH_STARTED names any basis but a quarantined recovery',
      history: [...direct, authorized],
      event: { ...quarantinedRecovery, classification: { ...unknown, outcome_basis: 'broker_restart_after_dispatch' } },
      why: /unknown without DISPATCH_STARTED/,
    },
    {
      when: "a quarantined recovery's unknown lands on an action already closed",
      history: [...direct, authorized, quarantinedRecovery],
      event: quarantinedRecovery,
      why: /unknown without DISPATCH_STARTED/,
    },
    {
      when: "a quarantined recovery's unknown is followed by not_attempted",
      history: [...direct, authorized, quarantinedRecovery],
      event: { ...quarantinedRecovery, classification: gate },
      why: /not_attempted after unknown/,
    },
  ];
  it.each(bugs)('when $when', ({ history, event, why }) => {
    const state = history.length === 0 ? undefined : project(stamp(history)).get(id);
    const [stamped] = stamp([event], history.length + 1);
    let thrown: unknown;
    try {
      foldEvent(state, stamped as JournalEvent);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CodedError);
    expect(thrown).not.toBeInstanceOf(TransitionRefused);
    expect(thrown).toMatchObject({ code: 'IMPOSSIBLE_TRANSITION', message: expect.stringMatching(why) });
    expect(transitionRefusalOf(thrown)).toBeUndefined();
  });

  it('when an event is out of order', () => {
    const state = project(stamp([accepted()])).get(id);
    const [late] = stamp([validated], 1);
    expect(() => foldEvent(state, late as JournalEvent)).toThrow(
      expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION' }),
    );
  });
});

describe('the session projection refuses a lost race as a value', () => {
  const sid = 'ses_refusal_0001';
  let seq = 0;
  const ev = (kind: JournalEvent['kind'], payload: unknown): JournalEvent => {
    seq += 1;
    return {
      kind,
      action_id: sid,
      session_id: sid,
      ticket: null,
      lane: null,
      seq,
      at_ms: 1_000 + seq,
      payload,
    } as JournalEvent;
  };
  const started = {
    pid: 10,
    uid: 1000,
    start_time: '555',
    ppid: 1,
    exe: '/usr/bin/node',
    cwd: '/w',
    parent_exe: null,
    client_name: 'x',
  };

  it('when the same process starts twice, is approved twice, is revoked after it ended, or ends twice', () => {
    const pending = applySessionEvent(undefined, ev('SESSION_STARTED', started));
    const kindOf = (state: Parameters<typeof foldSessionEvent>[0], event: JournalEvent): string => {
      const folded = foldSessionEvent(state, event);
      if (folded.ok) throw new Error(`${event.kind} was folded`);
      expect(folded.refusal.code).toBe('IMPOSSIBLE_TRANSITION');
      expect(folded.refusal.message).toMatch(new RegExp(`^seq ${event.seq} ${event.kind} on ${sid}: `));
      return folded.refusal.kind;
    };
    expect(kindOf(pending, ev('SESSION_STARTED', started))).toBe('session_exists');
    const approvedSession = applySessionEvent(pending, ev('SESSION_APPROVED', { actor: person }));
    expect(kindOf(approvedSession, ev('SESSION_APPROVED', { actor: person }))).toBe('session_not_pending');
    const ended = applySessionEvent(approvedSession, ev('SESSION_ENDED', { reason: 'process_exited' }));
    expect(kindOf(ended, ev('SESSION_REVOKED', { actor: person, reason: 'late' }))).toBe('session_closed');
    expect(kindOf(ended, ev('SESSION_RECONNECTED', { client_name: 'x', client_version: '1' }))).toBe('session_closed');
    expect(kindOf(ended, ev('SESSION_ENDED', { reason: 'process_exited' }))).toBe('session_ended');
  });

  it('when a session event names another subject, it is a bug and throws', () => {
    const other = applySessionEvent(undefined, { ...ev('SESSION_STARTED', started), action_id: 'ses_other_0001' });
    const misfiled = ev('SESSION_APPROVED', { actor: person });
    expect(() => foldSessionEvent(other, misfiled)).toThrow(expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION' }));
    expect(() => foldSessionEvent(other, ev('SESSION_APPROVED', { actor: person }))).not.toThrow(TransitionRefused);
  });
});
