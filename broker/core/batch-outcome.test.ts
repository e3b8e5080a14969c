import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchOutcomeSchema, classificationSchema, type Classification } from '../contract/index.js';
import { batchMembersMax, classifyBatch, type BatchEvidence, type BatchShape } from './batch-outcome.js';
import { classifyOutcome } from './classify-outcome.js';

const shape: BatchShape = {
  request: { members: '/changes', id: 'ref' },
  response: { members: '/results', id: 'ref', status: 'state', succeeded: ['ok', 'created'], rejected: ['invalid'] },
};
const bytes = (value: unknown): Uint8Array =>
  new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
const requestOf = (ids: ReadonlyArray<string | number>) => bytes({ changes: ids.map((ref) => ({ ref, op: 'set' })) });
const responseOf = (entries: ReadonlyArray<Record<string, unknown>>) => bytes({ results: entries });

const parentFor = (status: number, idempotent = false): Classification =>
  classifyOutcome({
    channel: 'http',
    dispatchStarted: true,
    connection: 'fresh',
    handedToTransport: true,
    requestComplete: true,
    idempotent,
    http: { status, framingComplete: true },
  });
const committed200 = parentFor(200);

function evidence(
  over: Partial<BatchEvidence> & { requestBody: Uint8Array; body: Uint8Array; status?: number; truncated?: boolean },
): BatchEvidence {
  const status = over.status ?? 200;
  return {
    shape: over.shape ?? shape,
    requestBody: over.requestBody,
    response: { status, body: over.body, truncated: over.truncated ?? false },
    parent: over.parent ?? parentFor(status),
    sameKeyRetryAllowed: over.sameKeyRetryAllowed ?? false,
  };
}

const five = ['a1', 'a2', 'a3', 'a4', 'a5'];
const fourDecided = responseOf([
  { ref: 'a1', state: 'ok' },
  { ref: 'a2', state: 'created' },
  { ref: 'a3', state: 'ok' },
  { ref: 'a4', state: 'invalid' },
]);

describe('when the complete response decides four of five members', () => {
  it('records five member outcomes, the missing one unknown (reconcile without a contract), and a partial parent', () => {
    const { batch, classification } = classifyBatch(evidence({ requestBody: requestOf(five), body: fourDecided }));
    expect(batch.members).toEqual([
      { id: 'a1', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'ok' },
      { id: 'a2', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'created' },
      { id: 'a3', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'ok' },
      { id: 'a4', outcome: 'rejected', effect: 'rejected', retry: 'after_correction', status: 'invalid' },
      { id: 'a5', outcome: 'unknown', effect: 'unknown_effect', retry: 'reconcile' },
    ]);
    expect(batch.completed_ids).toEqual(['a1', 'a2', 'a3']);
    expect(classification).toMatchObject({
      outcome: 'committed',
      effect: 'partial_effect',
      retry: 'never',
      outcome_basis: 'batch_partial_effect',
      source: 'remote_response',
      code: null,
    });
    expect(batchOutcomeSchema.parse(batch)).toEqual(batch);
  });

  it('gives the missing member same_idempotency_key when a same-key retry is allowed', () => {
    const { batch } = classifyBatch(
      evidence({ requestBody: requestOf(five), body: fourDecided, sameKeyRetryAllowed: true }),
    );
    expect(batch.members[4]).toEqual({
      id: 'a5',
      outcome: 'unknown',
      effect: 'unknown_effect',
      retry: 'same_idempotency_key',
    });
    expect(batch.members.slice(0, 4).map((m) => m.retry)).toEqual(['never', 'never', 'never', 'after_correction']);
  });
});

describe('when every member is decided', () => {
  it('all succeeded: the parent is succeeded with every id completed', () => {
    const { batch, classification } = classifyBatch(
      evidence({ requestBody: requestOf(five), body: responseOf(five.map((ref) => ({ ref, state: 'ok' }))) }),
    );
    expect(batch.completed_ids).toEqual(five);
    expect(classification).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      retry: 'never',
      outcome_basis: 'batch_all_members_succeeded',
    });
  });

  it('an unlisted status is a complete remote failure for that member: committed/failed, never retried', () => {
    const { batch, classification } = classifyBatch(
      evidence({
        requestBody: requestOf(['x', 'y']),
        body: responseOf([
          { ref: 'x', state: 'ok' },
          { ref: 'y', state: 'conflict' },
        ]),
      }),
    );
    expect(batch.members[1]).toEqual({
      id: 'y',
      outcome: 'committed',
      effect: 'failed',
      retry: 'never',
      status: 'conflict',
    });
    expect(classification).toMatchObject({ effect: 'partial_effect', outcome_basis: 'batch_partial_effect' });
  });

  it('none succeeded: the parent is committed/failed, and re-sending the batch is not offered', () => {
    const { batch, classification } = classifyBatch(
      evidence({
        requestBody: requestOf(['x', 'y']),
        body: responseOf([
          { ref: 'x', state: 'invalid' },
          { ref: 'y', state: 'boom' },
        ]),
      }),
    );
    expect(batch.completed_ids).toEqual([]);
    expect(classification).toMatchObject({
      outcome: 'committed',
      effect: 'failed',
      retry: 'never',
      outcome_basis: 'batch_no_member_succeeded',
    });
  });

  it('a 5xx whose body reports a mix is partial_effect with retry never even for an idempotent method', () => {
    const parent = parentFor(500, true);
    expect(parent.retry).toBe('backoff');
    const { classification } = classifyBatch(
      evidence({
        status: 500,
        parent,
        requestBody: requestOf(['x', 'y']),
        body: responseOf([{ ref: 'x', state: 'ok' }]),
      }),
    );
    expect(classification).toMatchObject({
      outcome: 'committed',
      effect: 'partial_effect',
      retry: 'never',
      code: 'REMOTE_ERROR_STATUS',
    });
  });
});

describe('when the response cannot itemize the members', () => {
  const cases: Array<[when: string, body: Uint8Array, truncated: boolean, basis: string]> = [
    ['the body is not JSON', bytes('<html>ok</html>'), false, 'batch_response_not_json'],
    ['the body is not UTF-8', new Uint8Array([0x7b, 0xc3, 0x28, 0x7d]), false, 'batch_response_not_json'],
    ['the body was truncated', fourDecided, true, 'batch_response_truncated'],
    ['the pointer is missing', bytes({ items: [] }), false, 'batch_response_members_not_found'],
    [
      'the pointer is not a list',
      bytes({ results: { ref: 'a1', state: 'ok' } }),
      false,
      'batch_response_members_not_found',
    ],
    [
      'no entry names a requested member',
      responseOf([{ ref: 'zz', state: 'ok' }, { ref: 'a1' }]),
      false,
      'batch_no_member_decided',
    ],
  ];
  it.each(cases)('%s: every member is unknown and the parent basis says so', (_when, body, truncated, basis) => {
    const { batch, classification } = classifyBatch(evidence({ requestBody: requestOf(five), body, truncated }));
    expect(batch.members.map((m) => [m.id, m.outcome, m.effect, m.retry])).toEqual(
      five.map((id) => [id, 'unknown', 'unknown_effect', 'reconcile']),
    );
    expect(batch.completed_ids).toEqual([]);
    expect(classification).toEqual({ ...committed200, outcome_basis: basis });
  });

  it('an entry that names a member twice decides neither of its statuses', () => {
    const { batch } = classifyBatch(
      evidence({
        requestBody: requestOf(['x', 'y']),
        body: responseOf([
          { ref: 'x', state: 'ok' },
          { ref: 'x', state: 'invalid' },
          { ref: 'y', state: 'ok' },
        ]),
      }),
    );
    expect(batch.members.map((m) => m.outcome)).toEqual(['unknown', 'committed']);
  });
});

describe('when the request cannot be itemized', () => {
  const cases: Array<[when: string, body: Uint8Array, basis: string]> = [
    ['the request is not JSON', bytes('a=1'), 'batch_request_not_json'],
    ['the request lacks the member list', bytes({ other: [] }), 'batch_request_members_not_found'],
    ['a member has no id', bytes({ changes: [{ ref: 'a' }, { op: 'x' }] }), 'batch_request_member_ids_unusable'],
    ['a member id is too long', requestOf(['a', 'x'.repeat(201)]), 'batch_request_member_ids_unusable'],
    ['two members share an id', requestOf(['a', 'a']), 'batch_request_member_ids_not_unique'],
    [
      `there are more than ${batchMembersMax} members`,
      requestOf(Array.from({ length: batchMembersMax + 1 }, (_, i) => `m${i}`)),
      'batch_too_large_to_itemize',
    ],
  ];
  it.each(cases)('%s: no member outcomes, and the parent basis says why', (_when, requestBody, basis) => {
    const { batch, classification } = classifyBatch(
      evidence({ requestBody, body: responseOf([{ ref: 'a', state: 'ok' }]) }),
    );
    expect(batch).toEqual({ members: [], completed_ids: [] });
    expect(classification).toEqual({ ...committed200, outcome_basis: basis });
  });

  it(`exactly ${batchMembersMax} members are still itemized`, () => {
    const ids = Array.from({ length: batchMembersMax }, (_, i) => `m${i}`);
    const { batch } = classifyBatch(
      evidence({ requestBody: requestOf(ids), body: responseOf([{ ref: 'm0', state: 'ok' }]) }),
    );
    expect(batch.members).toHaveLength(batchMembersMax);
    expect(batch.completed_ids).toEqual(['m0']);
  });
});

describe('when ids and statuses are numbers', () => {
  it('stringifies them, and a number id in the request matches a string one in the response', () => {
    const numeric: BatchShape = { ...shape, response: { ...shape.response, succeeded: ['200'], rejected: ['422'] } };
    const { batch } = classifyBatch(
      evidence({
        shape: numeric,
        requestBody: requestOf([7, 8]),
        body: responseOf([
          { ref: '7', state: 200 },
          { ref: 8, state: 422 },
        ]),
      }),
    );
    expect(batch.members).toEqual([
      { id: '7', outcome: 'committed', effect: 'succeeded', retry: 'never', status: '200' },
      { id: '8', outcome: 'rejected', effect: 'rejected', retry: 'after_correction', status: '422' },
    ]);
  });
});

describe('when the members sit deeper (RFC 6901 pointers)', () => {
  it('follows nested and escaped pointers in both bodies', () => {
    const deep: BatchShape = {
      request: { members: '/batch/0/a~1b', id: 'ref' },
      response: { ...shape.response, members: '/data/~0items' },
    };
    const requestBody = bytes({ batch: [{ 'a/b': [{ ref: 'x' }, { ref: 'y' }] }] });
    const { batch } = classifyBatch(
      evidence({ shape: deep, requestBody, body: bytes({ data: { '~items': [{ ref: 'x', state: 'ok' }] } }) }),
    );
    expect(batch.members.map((m) => [m.id, m.outcome])).toEqual([
      ['x', 'committed'],
      ['y', 'unknown'],
    ]);
  });
});

describe('when the parent is a complete refusal', () => {
  it('a 401 with an unreadable body refuses every member, and the parent is recorded unchanged', () => {
    const parent = parentFor(401);
    const { batch, classification } = classifyBatch(
      evidence({ status: 401, parent, requestBody: requestOf(['x', 'y']), body: bytes('denied') }),
    );
    expect(batch.members).toEqual([
      { id: 'x', outcome: 'rejected', effect: 'rejected', retry: 'never' },
      { id: 'y', outcome: 'rejected', effect: 'rejected', retry: 'never' },
    ]);
    expect(classification).toEqual(parent);
  });

  it('a 400 that itemizes some refusals shares the refusal with the rest (after correction)', () => {
    const parent = parentFor(400);
    const { batch, classification } = classifyBatch(
      evidence({
        status: 400,
        parent,
        requestBody: requestOf(['x', 'y']),
        body: responseOf([{ ref: 'x', state: 'invalid' }]),
      }),
    );
    expect(batch.members.map((m) => [m.outcome, m.retry, m.status])).toEqual([
      ['rejected', 'after_correction', 'invalid'],
      ['rejected', 'after_correction', undefined],
    ]);
    expect(classification).toEqual(parent);
  });

  it('a 4xx whose body reports a member that took effect is recorded committed/partial_effect, never a refusal', () => {
    const parent = parentFor(422);
    const { batch, classification } = classifyBatch(
      evidence({
        status: 422,
        parent,
        requestBody: requestOf(['x', 'y', 'z']),
        body: responseOf([
          { ref: 'x', state: 'ok' },
          { ref: 'y', state: 'invalid' },
        ]),
      }),
    );
    expect(classification).toMatchObject({
      outcome: 'committed',
      effect: 'partial_effect',
      retry: 'never',
      outcome_basis: 'batch_partial_effect',
    });
    // The refusal no longer covers the member the body is silent about.
    expect(batch.members[2]).toMatchObject({ id: 'z', outcome: 'unknown', retry: 'reconcile' });
  });
});

describe('programmer errors', () => {
  it('refuses a parent that is not settled', () => {
    const unknown = classifyOutcome({
      channel: 'http',
      dispatchStarted: true,
      handedToTransport: true,
      requestComplete: true,
      idempotent: false,
    });
    expect(() =>
      classifyBatch(evidence({ parent: unknown, requestBody: requestOf(['a']), body: bytes('{}') })),
    ).toThrow(/settled/);
  });
});

describe('properties', () => {
  const id = fc.string({ minLength: 1, maxLength: 8 });
  const status = fc.constantFrom('ok', 'created', 'invalid', 'conflict', 'pending');
  const scenario = fc.uniqueArray(id, { minLength: 0, maxLength: 20 }).chain((ids) =>
    fc.record({
      ids: fc.constant(ids),
      entries: fc.array(
        fc.record({
          ref: fc.oneof(fc.constantFrom(...(ids.length === 0 ? ['none'] : ids)), id),
          state: fc.option(status, { nil: undefined }),
        }),
        { maxLength: 30 },
      ),
      httpStatus: fc.constantFrom(200, 201, 207, 400, 401, 409, 422, 429, 500, 503),
      idempotent: fc.boolean(),
      sameKeyRetryAllowed: fc.boolean(),
      truncated: fc.boolean(),
    }),
  );

  it('completed_ids ⊆ request ids; partial_effect iff some but not all succeeded; committed only when the response names the member; legal combinations only', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const parent = parentFor(s.httpStatus, s.idempotent);
        const { batch, classification } = classifyBatch({
          shape,
          requestBody: requestOf(s.ids),
          response: { status: s.httpStatus, body: responseOf(s.entries), truncated: s.truncated },
          parent,
          sameKeyRetryAllowed: s.sameKeyRetryAllowed,
        });
        batchOutcomeSchema.parse(batch);
        classificationSchema.parse(classification);
        expect(batch.members.map((m) => m.id)).toEqual(s.ids);
        for (const done of batch.completed_ids) expect(s.ids).toContain(done);
        const succeeded = batch.members.filter((m) => m.effect === 'succeeded').length;
        expect(classification.effect === 'partial_effect').toBe(succeeded > 0 && succeeded < batch.members.length);
        const named = new Set(s.truncated ? [] : s.entries.filter((e) => e.state !== undefined).map((e) => e.ref));
        for (const m of batch.members) {
          if (m.outcome === 'committed') expect(named.has(m.id)).toBe(true);
          // Legal member combinations (the outcome contract's table).
          const legal = { committed: ['succeeded', 'failed'], rejected: ['rejected'], unknown: ['unknown_effect'] }[
            m.outcome
          ];
          expect(legal).toContain(m.effect);
          if (m.outcome === 'unknown')
            expect(m.retry).toBe(s.sameKeyRetryAllowed ? 'same_idempotency_key' : 'reconcile');
        }
        // The parent: settled outcomes only, with the effects the contract allows for them.
        const parentLegal = {
          committed: ['succeeded', 'failed', 'partial_effect'],
          rejected: ['rejected', 'no_effect'],
        } as Record<string, string[]>;
        expect(parentLegal[classification.outcome]).toContain(classification.effect);
        if (batch.members.some((m) => m.outcome === 'committed')) expect(classification.outcome).toBe('committed');
      }),
      { numRuns: 500 },
    );
  });
});
