import { describe, expect, it } from 'vitest';
import type { ActionState, Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { restartJournalQuarantinedBasis } from '../contract/index.js';
import { applyEvent, project, retriableRecord } from './project.js';

/**
 * The retry lease rules of the projection (DESIGN §3: one active attempt per invocation), each a
 * case that must be refused or allowed: abandon, reconciliation and attestation against a live
 * lease, a stale lookup, a same-key lease past the key's window, a retry after a throttled result.
 */
const fp = `sha256:${'f'.repeat(64)}`;
const id = 'act_lease_000001';
const person = { kind: 'person' as const, id: 'ann' };
const unknown: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'same_idempotency_key',
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
const throttled: Classification = {
  phase: 'remote_execution',
  outcome: 'rejected',
  retry: 'backoff',
  code: 'REMOTE_THROTTLED',
  effect: 'rejected',
  outcome_basis: 'throttled',
  source: 'remote_response',
};
const foundByLookup: Classification = {
  ...committed,
  outcome_basis: 'remote_operation_lookup',
  source: 'remote_query',
};
const keyExpiresAtMs = 5_000;

/** An action with a bound key (expiry 5 000), dispatched once and recorded with `first`. */
function base(first: Classification, idempotent = false): NewEvent[] {
  return [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      payload: {
        channel: 'http',
        target: 'route:docs POST /x',
        request_fingerprint: fp,
        approval: 'none',
        idempotent,
        retry_budget: 3,
      },
    },
    {
      kind: 'PREFLIGHT_VALIDATED',
      action_id: id,
      payload: { idempotency: { route: 'docs', scope: 's', key: 'k', fingerprint: fp, expires_at_ms: keyExpiresAtMs } },
    },
    {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
    },
    { kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } },
    first.outcome === 'unknown'
      ? { kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: 1 }, classification: first }
      : {
          kind: 'RESULT_COMMITTED',
          action_id: id,
          payload: { attempt: 1, result_id: 'res_1', result_digest: fp },
          classification: first,
        },
  ];
}
const lease = (
  generation: number,
  decision: 'RETRY_NEW_ATTEMPT' | 'RETRY_SAME_KEY' | 'RETRY_WHEN_ALLOWED' = 'RETRY_SAME_KEY',
  expires = 4_000,
): NewEvent => ({
  kind: 'RETRY_LEASED',
  action_id: id,
  payload: {
    generation,
    holder: `w${generation}`,
    expires_at_ms: expires,
    decision,
    requested_by: { kind: 'broker', id: 'retry-engine' },
  },
});
const dispatch = (attempt: number, generation: number): NewEvent => ({
  kind: 'DISPATCH_STARTED',
  action_id: id,
  payload: { attempt, connection: 'fresh', generation },
});

/** Stamps events with seq and the given wall times (default: 1 000 + seq). */
function fold(events: NewEvent[], atMs: (seq: number) => number = (seq) => 1_000 + seq) {
  const stamped = events.map(
    (e, i) => ({ ...e, seq: i + 1, at_ms: atMs(i + 1), session_id: null, ticket: 1, lane: 'lane-a' }) as JournalEvent,
  );
  return project(stamped).get(id);
}
const refusedWith = (events: NewEvent[], code: string, atMs?: (seq: number) => number): void => {
  expect(() => fold(events, atMs)).toThrow(expect.objectContaining({ code }));
};

describe('the retry lease in the projection', () => {
  it('retriableRecord is the rule RETRY_LEASED is folded by: never an unknown a quarantined recovery recorded before dispatch', () => {
    // Recovery in a quarantined journal records an open, undispatched action unknown: its record may lack the attempt.
    const quarantined: NewEvent = {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: {},
      classification: {
        ...unknown,
        phase: 'credential_injection',
        retry: 'same_idempotency_key',
        code: 'BROKER_RESTARTED',
        outcome_basis: restartJournalQuarantinedBasis,
        source: 'local_gate',
      },
    };
    const undispatched = [
      ...base(unknown).filter((e) => e.kind !== 'DISPATCH_STARTED' && e.kind !== 'OUTCOME_RECORDED'),
    ];
    const before = fold([...undispatched, quarantined]);
    expect(before).toMatchObject({ outcome: 'unknown', recorded: true, dispatch_seq: null });
    expect(retriableRecord(before as ActionState)).toBe(false);
    refusedWith([...undispatched, quarantined, lease(1)], 'IMPOSSIBLE_TRANSITION');
    // The records a retry may leave: an unknown after dispatch, a backoff outcome; and the lease is taken on them.
    for (const first of [unknown, throttled]) {
      const state = fold(base(first, true)) as ActionState;
      expect(retriableRecord(state)).toBe(true);
      const decision = first === unknown ? 'RETRY_SAME_KEY' : 'RETRY_WHEN_ALLOWED';
      expect(fold([...base(first, true), lease(1, decision)])?.retry_generation).toBe(1);
    }
    // Never a settled one, nor an abandoned unknown.
    expect(retriableRecord(fold(base(committed)) as ActionState)).toBe(false);
    const abandoned = fold([
      ...base(unknown),
      { kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'gave up' } },
    ]) as ActionState;
    expect(retriableRecord(abandoned)).toBe(false);
    refusedWith(
      [...base(unknown), { kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'gave up' } }, lease(1)],
      'IMPOSSIBLE_TRANSITION',
    );
  });

  it('an abandoned action is never dispatched again, even under a lease taken before the abandon', () => {
    refusedWith(
      [
        ...base(unknown),
        lease(1),
        { kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'gave up' } },
        dispatch(2, 1),
      ],
      'IMPOSSIBLE_TRANSITION',
    );
    const state = fold([
      ...base(unknown),
      lease(1),
      { kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'gave up' } },
    ]);
    expect(state?.lease).toMatchObject({ open: false });
  });

  it('no reconciliation or attestation over an attempt in flight, or under a live lease', () => {
    const reconciled: NewEvent = {
      kind: 'RECONCILIATION_RESULT',
      action_id: id,
      payload: { correlation: 'idempotency_token', lookup_action_id: 'act_lookup_000001' },
      classification: foundByLookup,
    };
    const attested: NewEvent = {
      kind: 'OPERATOR_ATTESTED',
      action_id: id,
      payload: { actor: person, basis: 'saw it' },
      classification: { ...committed, source: 'operator_attested', outcome_basis: 'operator_attested' },
    };
    refusedWith([...base(unknown), lease(1), reconciled], 'IMPOSSIBLE_TRANSITION');
    refusedWith([...base(unknown), lease(1), dispatch(2, 1), reconciled], 'IMPOSSIBLE_TRANSITION');
    refusedWith([...base(unknown), lease(1), attested], 'IMPOSSIBLE_TRANSITION');
    // Once that lease expired (its worker died), a person may settle it.
    expect(fold([...base(unknown), lease(1, 'RETRY_SAME_KEY', 1_007), attested])).toMatchObject({
      outcome: 'committed',
      source: 'operator_attested',
    });
  });

  it('a lookup that started before a retry ran is stale: its answer is refused', () => {
    const stale: NewEvent = {
      kind: 'RECONCILIATION_RESULT',
      action_id: id,
      payload: { correlation: 'idempotency_token', lookup_action_id: 'act_lookup_000001', attempts_seen: 1 },
      classification: { ...foundByLookup, outcome: 'rejected', effect: 'no_effect', retry: 'never', code: null },
    };
    refusedWith(
      [
        ...base(unknown),
        lease(1),
        dispatch(2, 1),
        { kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: 2 }, classification: unknown },
        stale,
      ],
      'IMPOSSIBLE_TRANSITION',
    );
    expect(fold([...base(unknown), stale])).toMatchObject({ outcome: 'rejected', source: 'remote_query' });
  });

  it('a same-key lease needs the key inside its window, at the lease and again at dispatch', () => {
    refusedWith([...base(unknown), lease(1)], 'IMPOSSIBLE_TRANSITION', (seq) =>
      seq === 6 ? keyExpiresAtMs : 1_000 + seq,
    );
    refusedWith([...base(unknown), lease(1, 'RETRY_SAME_KEY', 9_000), dispatch(2, 1)], 'LEASE_LOST', (seq) =>
      seq === 7 ? keyExpiresAtMs : 1_000 + seq,
    );
    // An idempotent repeat does not depend on the key.
    expect(
      fold([...base(unknown, true), lease(1, 'RETRY_NEW_ATTEMPT', 9_000), dispatch(2, 1)], (seq) =>
        seq === 7 ? keyExpiresAtMs : 1_000 + seq,
      ),
    ).toMatchObject({ stage: 'dispatch_started' });
  });

  it('a retry after a throttled answer commits its own result; a result is never committed over a settled one', () => {
    const retried = [
      ...base(throttled, true),
      lease(1, 'RETRY_WHEN_ALLOWED'),
      dispatch(2, 1),
      {
        kind: 'RESULT_COMMITTED',
        action_id: id,
        payload: { attempt: 2, result_id: 'res_2', result_digest: fp },
        classification: committed,
      } as NewEvent,
    ];
    expect(fold(retried)).toMatchObject({ outcome: 'committed', result_id: 'res_2' });
    const state = fold([...base(committed)]);
    expect(() =>
      applyEvent(state, {
        kind: 'RESULT_COMMITTED',
        action_id: id,
        payload: { attempt: 1, result_id: 'res_9', result_digest: fp },
        classification: committed,
        seq: 99,
        at_ms: 2_000,
        session_id: null,
        ticket: 1,
        lane: 'lane-a',
      }),
    ).toThrow(expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION' }));
  });
});
