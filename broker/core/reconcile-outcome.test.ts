import { describe, expect, it } from 'vitest';
import type { Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { project } from './project.js';
import { judgeLookup, planLookup, reconcileClassification, type NoRecordTiming } from './reconcile-outcome.js';

describe('reconcileClassification', () => {
  it('a complete 2xx says the remote holds the operation: committed, source remote_query', () => {
    for (const status of [200, 204]) {
      expect(reconcileClassification(status, 'idempotency_token', true)).toEqual({
        phase: 'remote_execution',
        outcome: 'committed',
        retry: 'never',
        code: null,
        effect: 'succeeded',
        outcome_basis: 'remote_query_found',
        source: 'remote_query',
      });
    }
    expect(reconcileClassification(200, 'operation_id')).toMatchObject({ outcome: 'committed' });
  });

  it('404/410 under a key within its declared retention is no record: rejected, no_effect', () => {
    for (const status of [404, 410]) {
      expect(reconcileClassification(status, 'idempotency_token', true)).toMatchObject({
        outcome: 'rejected',
        effect: 'no_effect',
        code: 'REMOTE_REJECTED',
        outcome_basis: 'remote_query_no_record',
        source: 'remote_query',
        retry: 'never',
      });
    }
  });

  it('anything else stays unknown with retry reconcile (never not_attempted)', () => {
    const inconclusive = {
      outcome: 'unknown',
      effect: 'unknown_effect',
      retry: 'reconcile',
      outcome_basis: 'remote_query_inconclusive',
      source: 'remote_query',
    };
    // An absent key after the retention (or with no retention proved) may simply be forgotten.
    expect(reconcileClassification(404, 'idempotency_token', false)).toMatchObject(inconclusive);
    expect(reconcileClassification(404, 'idempotency_token')).toMatchObject(inconclusive);
    // A created job's absence says nothing about the effect.
    expect(reconcileClassification(404, 'operation_id', true)).toMatchObject(inconclusive);
    for (const status of [undefined, 301, 400, 409, 429, 500, 503]) {
      expect(reconcileClassification(status, 'idempotency_token', true)).toMatchObject(inconclusive);
    }
  });
});

describe('judgeLookup', () => {
  // The original's last attempt ended at 1_000_000; its key is kept until 2_000_000; the route waits 60 s.
  const timing = (askedAtMs: number, overrides: Partial<NoRecordTiming> = {}): NoRecordTiming => ({
    keyExpiresAtMs: 2_000_000,
    attemptEndedAtMs: 1_000_000,
    askedAtMs,
    answeredAtMs: askedAtMs + 50,
    notFoundAfterMs: 60_000,
    ...overrides,
  });

  it('counts "no record" only from the route\'s wait after the last attempt, within the retention', () => {
    expect(judgeLookup(404, 'idempotency_token', timing(1_060_000))).toEqual({
      classification: expect.objectContaining({ outcome: 'rejected', effect: 'no_effect' }),
    });
    const early = judgeLookup(410, 'idempotency_token', timing(1_059_999));
    expect(early.classification).toMatchObject({ outcome: 'unknown', outcome_basis: 'remote_query_inconclusive' });
    expect(early.note).toMatch(/asked 59 s after the original's last attempt ended.*only from 60 s after it/);
    expect(
      judgeLookup(404, 'idempotency_token', timing(1_000_000, { notFoundAfterMs: 0 })).classification,
    ).toMatchObject({ outcome: 'rejected' });
  });

  it('after the retention, or with no key bound, "no record" proves nothing, however late (and says nothing about when)', () => {
    for (const late of [timing(2_000_000), timing(1_500_000, { keyExpiresAtMs: undefined })]) {
      expect(judgeLookup(404, 'idempotency_token', late)).toEqual({
        classification: expect.objectContaining({ outcome: 'unknown', outcome_basis: 'remote_query_inconclusive' }),
      });
    }
  });

  it('does not hold back a found operation, however early, and adds no note to other answers', () => {
    expect(judgeLookup(200, 'idempotency_token', timing(1_000_001))).toEqual({
      classification: expect.objectContaining({ outcome: 'committed' }),
    });
    for (const [status, correlation] of [
      [500, 'idempotency_token'],
      [404, 'operation_id'],
      [undefined, 'idempotency_token'],
    ] as const)
      expect(judgeLookup(status, correlation, timing(1_000_001)).note).toBeUndefined();
  });
});

describe('planLookup', () => {
  it('fills the strongest correlation the record holds, percent-encoded as one segment', () => {
    expect(planLookup('/operations/{idempotency_key}', { idempotencyKey: 'a b#c', operationId: 'job-1' })).toEqual({
      ok: true,
      correlation: 'idempotency_token',
      path: '/operations/a%20b%23c',
    });
    expect(planLookup('/jobs/{operation_id}/status', { idempotencyKey: 'k', operationId: 'job 1' })).toEqual({
      ok: true,
      correlation: 'operation_id',
      path: '/jobs/job%201/status',
    });
  });

  it('refuses a lookup that names nothing of this operation, or whose id the record lacks', () => {
    expect(planLookup('/operations', { idempotencyKey: 'k' })).toMatchObject({
      ok: false,
      why: expect.stringContaining('exactly one'),
    });
    expect(planLookup('/operations/{idempotency_key}', { operationId: 'job-1' })).toMatchObject({
      ok: false,
      why: expect.stringContaining('holds none'),
    });
  });
});

describe('the projection of a RECONCILIATION_RESULT', () => {
  const fp = `sha256:${'f'.repeat(64)}`;
  const id = 'act_000000001';
  function unknownAction(): { events: JournalEvent[]; add: (e: NewEvent) => void } {
    const events: JournalEvent[] = [];
    const add = (e: NewEvent): void => {
      events.push({ session_id: null, ticket: 1, lane: 'l', ...e, seq: events.length + 1, at_ms: 1 } as JournalEvent);
    };
    add({
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      payload: {
        channel: 'http',
        target: 'route:docs POST /d',
        request_fingerprint: fp,
        approval: 'none',
        idempotent: false,
      },
    });
    add({ kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} });
    add({
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
    });
    add({ kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } });
    add({ kind: 'CALLER_DEADLINE_EXCEEDED', action_id: id, payload: { stage: 'remote_execution' } });
    add({
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: reconcileClassification(undefined, 'idempotency_token'),
    });
    return { events, add };
  }
  const observe = (classification: Classification): NewEvent => ({
    kind: 'RECONCILIATION_RESULT',
    action_id: id,
    payload: { correlation: 'idempotency_token', lookup_action_id: 'act_000000002' },
    classification,
  });

  it('accepts found, no record and inconclusive, keeping the caller disposition', () => {
    for (const status of [200, 404, 500]) {
      const { events, add } = unknownAction();
      add(observe(reconcileClassification(status, 'idempotency_token', true)));
      expect(project(events).get(id)).toMatchObject({ source: 'remote_query', caller_disposition: 'timed_out' });
    }
  });

  it('refuses not_attempted, and any observation after it settled', () => {
    const never = unknownAction();
    never.add(observe({ ...reconcileClassification(404, 'idempotency_token', true), outcome: 'not_attempted' }));
    expect(() => project(never.events)).toThrow(/not_attempted after DISPATCH_STARTED/);
    const twice = unknownAction();
    twice.add(observe(reconcileClassification(200, 'idempotency_token', true)));
    twice.add(observe(reconcileClassification(500, 'idempotency_token', true)));
    expect(() => project(twice.events)).toThrow(/already settled/);
  });
});
