import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ActionState, Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { exhaustedClassification, planRetry, retryDelayMsMax, type RetryContext } from './plan-retry.js';
import { project } from './project.js';

const fp = `sha256:${'f'.repeat(64)}`;
const id = 'act_plan_000001';

/** A real folded state (a POST whose only attempt was recorded unknown), then adjusted per case. */
function unknownHead(overrides: Partial<ActionState> = {}): ActionState {
  const events: NewEvent[] = [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      payload: {
        channel: 'http',
        target: 'route:docs POST /releases',
        request_fingerprint: fp,
        approval: 'none',
        idempotent: false,
        retry_budget: 2,
      },
    },
    { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
    {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: { credential_id: 'c', version_tag: 'v1', injection_mode: 'bearer', request_fingerprint: fp },
    },
    { kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } },
    {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: {
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'same_idempotency_key',
        code: 'REMOTE_OUTCOME_UNKNOWN',
        effect: 'unknown_effect',
        outcome_basis: 'response_not_observed_after_dispatch',
        source: 'transport_observed',
      },
    },
  ];
  const stamped = events.map(
    (e, i) => ({ ...e, seq: i + 1, at_ms: 1_000 + i, session_id: null, ticket: 1, lane: null }) as JournalEvent,
  );
  const state = project(stamped).get(id);
  if (state === undefined) throw new Error('no state');
  return { ...state, ...overrides };
}

const ctx = (over: Partial<RetryContext> = {}): RetryContext => ({
  idempotent: false,
  fingerprint: unknownHead().request_fingerprint,
  keyExpiresAtMs: 10_000,
  backoffMs: 100,
  nowMs: 5_000,
  ...over,
});

describe('planRetry', () => {
  it('same key within its window → retry generation 1, after the base delay', () => {
    expect(planRetry(unknownHead(), ctx())).toEqual({
      kind: 'retry',
      decision: 'RETRY_SAME_KEY',
      generation: 1,
      delayMs: 100,
    });
  });

  it('same key past its window → reconcile, never a resend', () => {
    expect(planRetry(unknownHead(), ctx({ nowMs: 10_000 }))).toEqual({
      kind: 'reconcile',
      why: 'key_retention_passed',
    });
    expect(planRetry(unknownHead(), ctx({ keyExpiresAtMs: undefined }))).toEqual({
      kind: 'reconcile',
      why: 'key_retention_passed',
    });
  });

  it('a changed fingerprint under the key is not a same-key retry: reconcile', () => {
    expect(planRetry(unknownHead(), ctx({ fingerprint: `sha256:${'e'.repeat(64)}` }))).toEqual({
      kind: 'reconcile',
      why: 'no_safe_resend',
    });
  });

  it('an idempotent operation is repeated whatever the key', () => {
    expect(
      planRetry(unknownHead({ retry: 'backoff' }), ctx({ idempotent: true, keyExpiresAtMs: undefined })),
    ).toMatchObject({ kind: 'retry', decision: 'RETRY_NEW_ATTEMPT' });
  });

  it('another worker’s live lease holds it: nothing is planned over it (not even "exhausted"); an expired one does not', () => {
    const held = unknownHead({
      retry_generation: 2,
      lease: { generation: 2, holder: 'w2', expires_at_ms: 6_000, open: true, decision: 'RETRY_NEW_ATTEMPT' },
    });
    expect(planRetry(held, ctx())).toEqual({ kind: 'held', generation: 2 });
    expect(planRetry(held, ctx({ nowMs: 6_000 }))).toMatchObject({ kind: 'exhausted' });
  });

  it('the budget in the record bounds it, whatever is in memory', () => {
    expect(planRetry(unknownHead({ retry_generation: 2 }), ctx())).toEqual({
      kind: 'exhausted',
      decision: 'RETRY_SAME_KEY',
      budget: 2,
    });
    expect(planRetry(unknownHead({ retry_budget: 0 }), ctx())).toMatchObject({ kind: 'exhausted' });
  });

  it('stops while an attempt is unrecorded, after abandon, and on settled outcomes', () => {
    expect(planRetry(unknownHead({ recorded: false }), ctx())).toMatchObject({ kind: 'stop', decision: null });
    expect(planRetry(unknownHead({ abandoned: true }), ctx())).toMatchObject({ kind: 'stop' });
    expect(planRetry(unknownHead({ outcome: 'committed', retry: 'never' }), ctx())).toMatchObject({
      kind: 'stop',
      decision: { kind: 'RETURN_RECORDED_RESULT' },
    });
    expect(
      planRetry(unknownHead({ outcome: 'not_attempted', phase: 'credential_injection', retry: 'backoff' }), ctx()),
    ).toMatchObject({ kind: 'stop', decision: null });
  });

  it('waits for Retry-After when it is longer than the doubling, and never longer than the cap', () => {
    const throttled = unknownHead({ outcome: 'rejected', retry: 'backoff', retry_after_ms: 2_500 });
    expect(planRetry(throttled, ctx({ idempotent: true }))).toMatchObject({
      kind: 'retry',
      decision: 'RETRY_WHEN_ALLOWED',
      delayMs: 2_500,
    });
    expect(planRetry({ ...throttled, retry_after_ms: 10 ** 9 }, ctx({ idempotent: true }))).toMatchObject({
      delayMs: retryDelayMsMax,
    });
  });

  it('for any record: a resend is planned only for an unknown or backoff outcome, only within budget, and the next generation is always the recorded one + 1', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('unknown', 'committed', 'rejected', 'not_attempted'),
        fc.constantFrom('never', 'after_correction', 'backoff', 'same_idempotency_key', 'reconcile', 'fetch_result'),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        fc.boolean(),
        (outcome, retry, generation, budget, idempotent, withinWindow) => {
          const state = unknownHead({
            outcome,
            retry,
            retry_generation: generation,
            retry_budget: budget,
            phase: outcome === 'not_attempted' ? 'connection_setup' : 'remote_execution',
          } as Partial<ActionState>);
          const plan = planRetry(state, ctx({ idempotent, nowMs: withinWindow ? 5_000 : 20_000 }));
          if (plan.kind !== 'retry') return;
          expect(['unknown', 'not_attempted', 'rejected']).toContain(outcome);
          if (outcome !== 'unknown') expect(retry).toBe('backoff');
          expect(plan.generation).toBe(generation + 1);
          expect(plan.generation).toBeLessThanOrEqual(budget);
          if (plan.decision === 'RETRY_SAME_KEY') expect(withinWindow).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('exhaustedClassification', () => {
  const last: Classification = {
    phase: 'remote_execution',
    outcome: 'unknown',
    retry: 'same_idempotency_key',
    code: 'REMOTE_OUTCOME_UNKNOWN',
    effect: 'unknown_effect',
    outcome_basis: 'response_not_observed_after_dispatch',
    source: 'transport_observed',
  };
  it('keeps the last evidence, says why automation stopped, and points at reconcile', () => {
    expect(exhaustedClassification(last)).toEqual({
      ...last,
      code: 'RETRY_BUDGET_EXHAUSTED',
      retry: 'reconcile',
      outcome_basis: 'retry_budget_exhausted',
    });
  });
  it('never re-classifies a settled outcome', () => {
    expect(
      exhaustedClassification({
        ...last,
        outcome: 'rejected',
        retry: 'backoff',
        code: 'REMOTE_THROTTLED',
        effect: 'rejected',
      }),
    ).toBeUndefined();
  });
});
