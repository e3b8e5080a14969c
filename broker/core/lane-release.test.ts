import { describe, expect, it } from 'vitest';
import type { Actor, Classification, JournalEvent, LaneRelease, NewEvent } from '../contract/index.js';
import { laneRelease } from './lane-release.js';

const id = 'act_000000001';
const fp = `sha256:${'f'.repeat(64)}`;
const alice: Actor = { kind: 'person', id: 'alice' };
const engine: Actor = { kind: 'broker', id: 'retry-engine' };
const agent: Actor = { kind: 'agent', id: 'ses_1' };

const c = (over: Partial<Classification>): Classification => ({
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'REMOTE_OUTCOME_UNKNOWN',
  effect: 'unknown_effect',
  outcome_basis: 'response_not_observed_after_dispatch',
  source: 'transport_observed',
  ...over,
});
const unknown = c({});
const committed = c({
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
});
const rejected = c({
  outcome: 'rejected',
  retry: 'never',
  code: 'REMOTE_REJECTED',
  effect: 'rejected',
  outcome_basis: 'http_409',
  source: 'remote_response',
});
const throttled = c({
  outcome: 'rejected',
  retry: 'backoff',
  code: 'REMOTE_THROTTLED',
  effect: 'rejected',
  outcome_basis: 'throttled_retry_after',
  source: 'remote_response',
});

/** Steps of one action's life, each a function of the attempt it is on. */
type Step = (n: number) => NewEvent[];
const dispatch =
  (generation?: number): Step =>
  (n) => [
    {
      kind: 'DISPATCH_STARTED',
      action_id: id,
      payload: { attempt: n, connection: 'fresh', ...(generation === undefined ? {} : { generation }) },
    },
  ];
const recorded =
  (classification: Classification): Step =>
  (n) => [{ kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: n }, classification }];
const resultCommitted =
  (classification: Classification): Step =>
  (n) => [
    {
      kind: 'RESULT_COMMITTED',
      action_id: id,
      payload: { attempt: n, result_id: `res_${n}`, result_digest: fp },
      classification,
    },
  ];
const leased =
  (
    generation: number,
    decision: 'RETRY_NEW_ATTEMPT' | 'RETRY_SAME_KEY' | 'RETRY_WHEN_ALLOWED',
    requestedBy: Actor = engine,
  ): Step =>
  () => [
    {
      kind: 'RETRY_LEASED',
      action_id: id,
      payload: {
        generation,
        holder: `worker-${generation}`,
        expires_at_ms: 9_999_999,
        decision,
        requested_by: requestedBy,
      },
    },
  ];
const setupFailed: Step = (n) => [
  { kind: 'SETUP_ATTEMPT_FAILED', action_id: id, payload: { attempt: n, stage: 'tcp_connect' } },
];
const reconciled =
  (classification: Classification, actor?: Actor): Step =>
  () => [
    {
      kind: 'RECONCILIATION_RESULT',
      action_id: id,
      payload: {
        correlation: 'idempotency_token',
        lookup_action_id: 'act_lookup_01',
        ...(actor === undefined ? {} : { actor }),
      },
      classification,
    },
  ];
const attested: Step = () => [
  {
    kind: 'OPERATOR_ATTESTED',
    action_id: id,
    payload: { actor: alice, basis: 'seen in the remote audit log' },
    classification: c({
      outcome: 'committed',
      retry: 'never',
      code: null,
      effect: 'succeeded',
      outcome_basis: 'operator_attested',
      source: 'operator_attested',
    }),
  },
];
const abandoned: Step = () => [
  { kind: 'ABANDONED', action_id: id, payload: { actor: alice, reason: 'the remote is gone' } },
];
const callerGaveUp: Step = () => [
  { kind: 'CALLER_DEADLINE_EXCEEDED', action_id: id, payload: { stage: 'request_sent' } },
];

/** Accepted, validated, authorized, then the steps; attempts are numbered as the journal would. */
function history(steps: readonly Step[], lane: string | null = 'lane-a'): JournalEvent[] {
  const out: NewEvent[] = [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      payload: {
        channel: 'http',
        target: 'route:docs POST /documents/{id}',
        request_fingerprint: fp,
        approval: 'none',
        idempotent: true,
        retry_budget: 3,
      },
    },
    // A bound key (far expiry), so same-key leases are allowed as they would be under a contract.
    {
      kind: 'PREFLIGHT_VALIDATED',
      action_id: id,
      payload: {
        idempotency: { route: 'docs', scope: 'docs.account', key: 'k-1', fingerprint: fp, expires_at_ms: 9_999_999 },
      },
    },
    {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: { credential_id: 'cred_1', version_tag: 'v1', injection_mode: 'bearer', request_fingerprint: fp },
    },
  ];
  let attempt = 0;
  for (const step of steps) {
    // A dispatch or a setup failure starts the next attempt; everything else names the current one.
    const next = step(attempt + 1);
    const starts = next[0]?.kind === 'DISPATCH_STARTED' || next[0]?.kind === 'SETUP_ATTEMPT_FAILED';
    if (starts) attempt += 1;
    out.push(...(starts ? next : step(attempt)));
  }
  return out.map(
    (e, i) => ({ session_id: 'ses_1', ticket: 1, lane, ...e, seq: 10 + i, at_ms: 1_000 + i }) as JournalEvent,
  );
}
const seqOf = (events: readonly JournalEvent[], kind: JournalEvent['kind'], nth = 1): number =>
  events.filter((e) => e.kind === kind)[nth - 1]?.seq ?? -1;

describe('laneRelease: what released the lane an unknown head blocked', () => {
  it.each<[string, Step[], (events: JournalEvent[]) => LaneRelease]>([
    [
      'an idempotent repeat: a RETRY_NEW_ATTEMPT lease whose attempt commits',
      [dispatch(), recorded(unknown), leased(1, 'RETRY_NEW_ATTEMPT'), dispatch(1), resultCommitted(committed)],
      (e) => ({
        kind: 'idempotent_repeat',
        seq: seqOf(e, 'RESULT_COMMITTED'),
        actor: engine,
        lease_seq: seqOf(e, 'RETRY_LEASED'),
        outcome: 'committed',
        source: 'remote_response',
      }),
    ],
    [
      'a same-key retry asked for by the agent, whose attempt is refused (rejected settles too)',
      [dispatch(), recorded(unknown), leased(1, 'RETRY_SAME_KEY', agent), dispatch(1), resultCommitted(rejected)],
      (e) => ({
        kind: 'same_key_retry',
        seq: seqOf(e, 'RESULT_COMMITTED'),
        actor: agent,
        lease_seq: seqOf(e, 'RETRY_LEASED'),
        outcome: 'rejected',
        source: 'remote_response',
      }),
    ],
    [
      'a retry after backoff (the lease names RETRY_WHEN_ALLOWED)',
      [dispatch(), recorded(unknown), leased(1, 'RETRY_WHEN_ALLOWED'), dispatch(1), recorded(throttled)],
      (e) => ({
        kind: 'retry_after_backoff',
        seq: seqOf(e, 'OUTCOME_RECORDED', 2),
        actor: engine,
        lease_seq: seqOf(e, 'RETRY_LEASED'),
        outcome: 'rejected',
        source: 'remote_response',
      }),
    ],
    [
      'a retry that ends unknown again keeps it blocked; the second retry that settles released it',
      [
        dispatch(),
        recorded(unknown),
        leased(1, 'RETRY_SAME_KEY'),
        dispatch(1),
        recorded(unknown),
        leased(2, 'RETRY_NEW_ATTEMPT'),
        dispatch(2),
        resultCommitted(committed),
      ],
      (e) => ({
        kind: 'idempotent_repeat',
        seq: seqOf(e, 'RESULT_COMMITTED'),
        actor: engine,
        lease_seq: seqOf(e, 'RETRY_LEASED', 2),
        outcome: 'committed',
        source: 'remote_response',
      }),
    ],
    [
      'a retry whose setup fails stays blocked; a reconciliation asked for by a person then settles it',
      [
        dispatch(),
        recorded(unknown),
        leased(1, 'RETRY_SAME_KEY'),
        setupFailed,
        recorded(unknown),
        reconciled(committed, alice),
      ],
      (e) => ({
        kind: 'reconciliation',
        seq: seqOf(e, 'RECONCILIATION_RESULT'),
        actor: alice,
        outcome: 'committed',
        source: 'remote_response',
      }),
    ],
    [
      'a reconciliation by automation (no actor), source remote_query',
      [
        dispatch(),
        recorded(unknown),
        callerGaveUp,
        reconciled({ ...committed, outcome_basis: 'remote_operation_lookup', source: 'remote_query' }),
      ],
      (e) => ({
        kind: 'reconciliation',
        seq: seqOf(e, 'RECONCILIATION_RESULT'),
        outcome: 'committed',
        source: 'remote_query',
      }),
    ],
    [
      'an inconclusive reconciliation keeps it blocked; a person’s attestation released it',
      [dispatch(), recorded(unknown), reconciled({ ...unknown, source: 'remote_query' }), attested],
      (e) => ({
        kind: 'operator_attested',
        seq: seqOf(e, 'OPERATOR_ATTESTED'),
        actor: alice,
        outcome: 'committed',
        source: 'operator_attested',
        reason: 'seen in the remote audit log',
      }),
    ],
    [
      'an abandonment by a person: the outcome stays unknown; a later attestation does not re-release it',
      [dispatch(), recorded(unknown), abandoned, attested],
      (e) => ({
        kind: 'abandoned',
        seq: seqOf(e, 'ABANDONED'),
        actor: alice,
        outcome: 'unknown',
        reason: 'the remote is gone',
      }),
    ],
  ])('when %s', (_when, steps, expected) => {
    const events = history(steps);
    expect(laneRelease(events)).toEqual(expected(events));
  });

  it.each<[string, Step[], string | null]>([
    ['it never dispatched', [], 'lane-a'],
    ['its first attempt settled', [dispatch(), resultCommitted(committed)], 'lane-a'],
    ['its attempt is in flight (dispatched, nothing recorded)', [dispatch()], 'lane-a'],
    ['it is blocked now', [dispatch(), recorded(unknown)], 'lane-a'],
    [
      'it is blocked now, after an inconclusive reconciliation',
      [dispatch(), recorded(unknown), reconciled({ ...unknown, source: 'remote_query' })],
      'lane-a',
    ],
    [
      'its retry is in flight: the lane is still busy',
      [dispatch(), recorded(unknown), leased(1, 'RETRY_SAME_KEY'), dispatch(1)],
      'lane-a',
    ],
    [
      'a throttled first attempt (rejected, backoff) resolved the ticket before its retry: never blocked',
      [dispatch(), recorded(throttled), leased(1, 'RETRY_WHEN_ALLOWED'), dispatch(1), resultCommitted(committed)],
      'lane-a',
    ],
    [
      'it is in no lane (a lookup, a lane-less read): it blocked nothing',
      [dispatch(), recorded(unknown), abandoned],
      null,
    ],
  ])('is null when %s', (_when, steps, lane) => {
    expect(laneRelease(history(steps, lane))).toBeNull();
  });

  it('is null for no events at all', () => {
    expect(laneRelease([])).toBeNull();
  });

  it('an unknown head settled by anything else contradicts invariant 7 and throws IMPOSSIBLE_TRANSITION', () => {
    // A late result on the first attempt, after its unknown was recorded, with no retry lease.
    const events = history([dispatch(), recorded(unknown), resultCommitted(committed)]);
    expect(() => laneRelease(events)).toThrow(
      expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION', message: expect.stringContaining('RESULT_COMMITTED') }),
    );
  });

  it('a release that is retried and blocked again is not a release now: null until the next one', () => {
    // Committed by a reconciliation is final, so re-blocking needs a backoff outcome: throttled retry after an unknown.
    const blockedAgain = history([
      dispatch(),
      recorded(unknown),
      leased(1, 'RETRY_SAME_KEY'),
      dispatch(1),
      recorded(throttled),
      leased(2, 'RETRY_WHEN_ALLOWED'),
      dispatch(2),
      recorded(unknown),
    ]);
    expect(laneRelease(blockedAgain)).toBeNull();
    const releasedAgain = history([
      dispatch(),
      recorded(unknown),
      leased(1, 'RETRY_SAME_KEY'),
      dispatch(1),
      recorded(throttled),
      leased(2, 'RETRY_WHEN_ALLOWED'),
      dispatch(2),
      recorded(unknown),
      abandoned,
    ]);
    expect(laneRelease(releasedAgain)).toMatchObject({ kind: 'abandoned', seq: seqOf(releasedAgain, 'ABANDONED') });
  });
});
