import { describe, expect, it } from 'vitest';
import type { Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { classificationSchema, eventPayloadSchemas } from '../contract/index.js';
import { resolveJsonPointer } from './json-pointer.js';
import { project } from './project.js';
import {
  classifyReadBack,
  planLookup,
  planReadBack,
  reconcileClassification,
  type ReadBackAnswer,
  type ReadBackSpec,
} from './reconcile-outcome.js';

/**
 * Reconciliation correlations beyond the idempotency token and operation id (issue 7, article
 * 003): the provider request id as a lookup placeholder, and the bounded read-back — the weakest
 * correlation — planned from the recorded request fields and judged from its answer.
 */
describe('planLookup with a provider request id', () => {
  it('fills {provider_request_id} from the record, percent-encoded as one segment', () => {
    expect(planLookup('/requests/{provider_request_id}', { providerRequestId: 'req:1/2' })).toEqual({
      ok: true,
      correlation: 'provider_request_id',
      path: '/requests/req%3A1%2F2',
    });
  });

  it('is refused when the record holds no provider request id, even with weaker-looking facts present', () => {
    expect(planLookup('/requests/{provider_request_id}', { idempotencyKey: 'k', operationId: 'job-1' })).toMatchObject({
      ok: false,
      why: expect.stringContaining('{provider_request_id}'),
    });
  });

  it('takes the strongest correlation a template binds: token, then operation id, then provider request id', () => {
    const all = { idempotencyKey: 'k', operationId: 'j', providerRequestId: 'r' };
    expect(planLookup('/ops/{provider_request_id}/{operation_id}', all)).toMatchObject({
      ok: true,
      correlation: 'operation_id',
    });
    expect(planLookup('/ops/{provider_request_id}/{idempotency_key}', all)).toMatchObject({
      ok: true,
      correlation: 'idempotency_token',
    });
    expect(planLookup('/ops/{provider_request_id}/{operation_id}', { providerRequestId: 'r' })).toMatchObject({
      ok: true,
      correlation: 'provider_request_id',
    });
  });

  it('a 2xx by provider request id is found; a 404 under it proves nothing (the request reached the remote)', () => {
    expect(reconcileClassification(200, 'provider_request_id')).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'remote_query_found',
      source: 'remote_query',
    });
    expect(reconcileClassification(404, 'provider_request_id', true)).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'remote_query_inconclusive',
      retry: 'reconcile',
    });
  });
});

const spec: ReadBackSpec = {
  path: '/orders/by-ref/{external_ref}',
  query: { customer: '{customer}', status: 'any', limit: '10' },
  items: '/data/items',
  match: ['external_ref', 'customer'],
  items_max: 3,
};
const values = { external_ref: 'ref 7/a', customer: '42' };

describe('planReadBack', () => {
  it('fills the path (one encoded segment) and the exact {field} query values from the record; literals stay', () => {
    expect(planReadBack(spec, values)).toEqual({
      ok: true,
      path: '/orders/by-ref/ref%207%2Fa',
      query: { customer: '42', status: 'any', limit: '10' },
    });
  });

  it('is refused when a path, query or match field has no recorded value, naming each', () => {
    const plan = planReadBack(spec, { external_ref: 'r' });
    expect(plan).toMatchObject({ ok: false, why: expect.stringContaining('customer') });
    expect(planReadBack(spec, undefined)).toMatchObject({
      ok: false,
      why: expect.stringMatching(/external_ref, customer/),
    });
    // A match field alone is enough to refuse: the answer could not be compared.
    expect(planReadBack({ ...spec, path: '/orders', query: {} }, { external_ref: 'r' })).toMatchObject({
      ok: false,
      why: expect.stringContaining('customer'),
    });
  });

  it('never reads a field from the prototype', () => {
    expect(planReadBack({ ...spec, path: '/o/{constructor}', query: {}, match: ['constructor'] }, {})).toMatchObject({
      ok: false,
    });
  });
});

const answer = (document: unknown, over: Partial<ReadBackAnswer> = {}): ReadBackAnswer => ({
  status: 200,
  body: JSON.stringify(document),
  truncated: false,
  ...over,
});
const listOf = (...items: unknown[]): unknown => ({ data: { items } });
const mine = { external_ref: 'ref 7/a', customer: 42, amount: 5 };

describe('classifyReadBack', () => {
  const cases: ReadonlyArray<{
    when: string;
    answer: ReadBackAnswer;
    outcome: string;
    basis: string;
    readBack?: { matched: number; examined: number };
    note: RegExp;
  }> = [
    {
      when: 'exactly one candidate carries every recorded field (a number compared as printed)',
      answer: answer(listOf({ external_ref: 'other', customer: '42' }, mine)),
      outcome: 'committed',
      basis: 'remote_read_back_match',
      readBack: { matched: 1, examined: 2 },
      note: /exactly one of 2 .*bounded \(at most 3\)/,
    },
    {
      when: 'no candidate matches (absence is not proof of no effect)',
      answer: answer(listOf({ external_ref: 'ref 7/a', customer: '43' }, { external_ref: 'ref 7/A', customer: '42' })),
      outcome: 'unknown',
      basis: 'remote_read_back_no_match',
      readBack: { matched: 0, examined: 2 },
      note: /absence in a read-back is not proof of no effect/,
    },
    {
      when: 'the list is empty',
      answer: answer(listOf()),
      outcome: 'unknown',
      basis: 'remote_read_back_no_match',
      readBack: { matched: 0, examined: 0 },
      note: /not proof of no effect/,
    },
    {
      when: 'two candidates match',
      answer: answer(listOf(mine, { ...mine, amount: 6 })),
      outcome: 'unknown',
      basis: 'remote_read_back_ambiguous',
      readBack: { matched: 2, examined: 2 },
      note: /ambiguous/,
    },
    {
      when: 'more candidates than items_max, even with exactly one match',
      answer: answer(listOf(mine, {}, {}, {})),
      outcome: 'unknown',
      basis: 'remote_read_back_unbounded',
      readBack: { matched: 1, examined: 4 },
      note: /more than items_max 3/,
    },
    {
      when: 'the answer was truncated',
      answer: answer(listOf(mine), { truncated: true }),
      outcome: 'unknown',
      basis: 'remote_read_back_unbounded',
      note: /larger than the broker keeps/,
    },
    {
      when: 'the answer is not JSON',
      answer: { status: 200, body: '{"data":', truncated: false },
      outcome: 'unknown',
      basis: 'remote_read_back_unreadable',
      note: /not JSON/,
    },
    {
      when: 'there is no array at items',
      answer: answer({ data: { items: { 0: mine } } }),
      outcome: 'unknown',
      basis: 'remote_read_back_unreadable',
      note: /no array at \/data\/items/,
    },
    {
      when: 'the read-back answered 500',
      answer: answer(listOf(mine), { status: 500 }),
      outcome: 'unknown',
      basis: 'remote_query_inconclusive',
      note: /HTTP 500/,
    },
    {
      when: 'the read-back has no complete answer',
      answer: { status: undefined, body: '', truncated: false },
      outcome: 'unknown',
      basis: 'remote_query_inconclusive',
      note: /no complete answer/,
    },
  ];
  for (const c of cases) {
    it(`when ${c.when}: ${c.outcome} (${c.basis})`, () => {
      const verdict = classifyReadBack(c.answer, spec, values);
      expect(verdict.classification).toMatchObject({
        outcome: c.outcome,
        outcome_basis: c.basis,
        source: 'remote_query',
        phase: 'remote_execution',
      });
      expect(verdict.readBack).toEqual(c.readBack);
      expect(verdict.note).toMatch(c.note);
      // Every verdict is a well-formed classification and a well-formed journal payload.
      expect(classificationSchema.safeParse(verdict.classification).success).toBe(true);
      expect(
        eventPayloadSchemas.RECONCILIATION_RESULT.safeParse({
          correlation: 'bounded_read_back',
          lookup_action_id: 'act_1',
          note: verdict.note,
          read_back: verdict.readBack,
        }).success,
      ).toBe(true);
    });
  }

  it('a match settles committed/succeeded with retry never; every other verdict is unknown with retry reconcile', () => {
    expect(classifyReadBack(answer(listOf(mine)), spec, values).classification).toEqual({
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
      code: null,
      effect: 'succeeded',
      outcome_basis: 'remote_read_back_match',
      source: 'remote_query',
    });
    expect(classifyReadBack(answer(listOf()), spec, values).classification).toEqual({
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      effect: 'unknown_effect',
      outcome_basis: 'remote_read_back_no_match',
      source: 'remote_query',
    });
  });

  it('does not count arrays, nulls, strings or inherited fields as a match', () => {
    const odd = answer(listOf(null, 'ref 7/a', ['ref 7/a', '42'], { customer: '42' }, { ...mine, customer: true }));
    expect(classifyReadBack(odd, spec, values).readBack).toEqual({ matched: 0, examined: 5 });
    const proto = classifyReadBack(answer(listOf({})), { ...spec, match: ['constructor'] }, {});
    expect(proto.readBack).toEqual({ matched: 0, examined: 1 });
  });

  it('reads the whole document as the list when items is the empty pointer', () => {
    expect(classifyReadBack(answer([mine]), { ...spec, items: '' }, values)).toMatchObject({
      readBack: { matched: 1, examined: 1 },
      classification: { outcome: 'committed' },
    });
  });

  it('keeps the note within the journal bound however many fields are named', () => {
    const many = Array.from({ length: 8 }, (_, i) => `${'f'.repeat(62)}_${i}`);
    const note = classifyReadBack(answer(listOf()), { ...spec, match: many }, {}).note;
    expect(note.length).toBeLessThanOrEqual(500);
    expect(note.length).toBeGreaterThan(400);
  });
});

describe('resolveJsonPointer', () => {
  const doc = { a: [{ 'b/c': 1, '~d': 2 }], '': 3 };
  it.each([
    ['', doc],
    ['/a/0/b~1c', 1],
    ['/a/0/~0d', 2],
    ['/', 3],
    ['/a/1', undefined],
    ['/a/01', undefined],
    ['/a/-', undefined],
    ['/x', undefined],
    ['/constructor', undefined],
    ['a', undefined],
  ])('%j → %j', (pointer, value) => {
    expect(resolveJsonPointer(doc, pointer)).toEqual(value);
  });
});

describe('the projection of a read-back observation', () => {
  const fp = `sha256:${'f'.repeat(64)}`;
  const id = 'act_000000001';
  function unknownWith(classification: Classification): JournalEvent[] {
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
    add({ kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: { correlation_values: values } });
    add({
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
    });
    add({ kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } });
    add({
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: reconcileClassification(undefined, 'idempotency_token'),
    });
    add({
      kind: 'RECONCILIATION_RESULT',
      action_id: id,
      payload: {
        correlation: 'bounded_read_back',
        lookup_action_id: 'act_000000002',
        note: 'n',
        read_back: { matched: 1, examined: 1 },
      },
      classification,
    });
    return events;
  }

  it('a match settles the action committed from remote_query; no match leaves it unknown', () => {
    expect(
      project(unknownWith(classifyReadBack(answer(listOf(mine)), spec, values).classification)).get(id),
    ).toMatchObject({ outcome: 'committed', source: 'remote_query', outcome_basis: 'remote_read_back_match' });
    expect(project(unknownWith(classifyReadBack(answer(listOf()), spec, values).classification)).get(id)).toMatchObject(
      { outcome: 'unknown', retry: 'reconcile', outcome_basis: 'remote_read_back_no_match' },
    );
  });
});
