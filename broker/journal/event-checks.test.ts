import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { attestClassification } from '../core/index.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { attestedRejection } from '../testing/attested-rejection.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import {
  EventChecksDisagree,
  eventChecksFromEnv,
  NewEventChecker,
  shapeOf,
  validateNewEvent,
  valueIssuesOnly,
} from './validate-new-event.js';

/** An admission as the HTTP executor makes it: a card's view of the request, pairs (tuples) in arrays. */
function acceptedWithView(id: string): NewEvent {
  const [accepted] = actionPaths.httpNoApproval(id) as [Extract<NewEvent, { kind: 'ACTION_ACCEPTED' }>];
  return {
    ...accepted,
    payload: {
      ...accepted.payload,
      request_view: {
        query: [
          ['page', '2'],
          ['q', 'x'.repeat(512), { name_hidden: 0, value_hidden: 40 }],
        ],
        headers: [['content-type', 'application/json']],
        body_bytes: 23,
      },
    },
  };
}

/** Every event of every scripted action path, and an admission with a request view: the shapes the broker makes. */
const samples: NewEvent[] = [
  ...actionPathNames.flatMap((name, i) => actionPaths[name](`act_sample_${String(i).padStart(4, '0')}`)),
  acceptedWithView('act_sample_view'),
];

/** A checker that has seen (and accepted) every sample's shape. */
function primed(mode: 'shapes' | 'both'): NewEventChecker {
  const checker = new NewEventChecker(mode);
  for (const event of samples) checker.check(event);
  return checker;
}

/** The object paths inside `value` (the root's path is []): where a key can be added. */
function objectPaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (value === null || typeof value !== 'object') return [];
  const here = Array.isArray(value) ? [] : [path];
  return [
    ...here,
    ...Object.entries(value as Record<string, unknown>).flatMap(([key, inner]) =>
      objectPaths(inner, [...path, Array.isArray(value) ? Number(key) : key]),
    ),
  ];
}

/** A deep copy of `event` with `key` set to `extra` in the object at `path`. */
function withKey(event: NewEvent, path: (string | number)[], key: string, extra: unknown): unknown {
  const copy = structuredClone(event) as unknown as Record<string | number, unknown>;
  let target: Record<string | number, unknown> = copy;
  for (const step of path) target = target[step] as Record<string | number, unknown>;
  target[key] = extra;
  return copy;
}

describe('shapeOf', () => {
  it('tells apart what differs in a key, a key order, a leaf type, an array element or a class instance', () => {
    const shapes = [
      { a: 's', b: 1 },
      { b: 1, a: 's' },
      { a: 's', b: '1' },
      { a: 's', b: null },
      { a: 's' },
      { a: 's', b: 1, c: undefined },
      { a: ['x', 'y'], b: 1 },
      { a: ['x', 2], b: 1 },
      { a: [['x', 'y']], b: 1 },
      { a: new Uint8Array(1), b: 1 },
    ].map(shapeOf);
    expect(new Set(shapes).size).toBe(shapes.length);
  });

  it('cannot be forged by a key that spells another structure', () => {
    // Without the length prefix both would read `{a=s,b=d,}`.
    expect(shapeOf({ 'a=s,b': 1 })).not.toBe(shapeOf({ a: 's', b: 1 }));
  });

  it("shapes a short array element by element, so a pair's third element is another shape; a long list's length is not", () => {
    expect(shapeOf({ h: [['a', 'b']] })).not.toBe(shapeOf({ h: [['a', 'b', 'c']] }));
    expect(shapeOf({ h: [['a', 'b']] })).not.toBe(
      shapeOf({
        h: [
          ['a', 'b'],
          ['c', 'd'],
        ],
      }),
    );
    const long = (n: number): unknown => ({ h: Array.from({ length: n }, (_, i) => [`k${i}`, 'v']) });
    expect(shapeOf(long(9))).toBe(shapeOf(long(30)));
    expect(shapeOf(long(30))).not.toBe(shapeOf({ h: [...(long(30) as { h: unknown[] }).h, ['k', 'v', 'x']] }));
  });

  it('gives nothing but plain data a shape it could remember: a toJSON, a non-finite number, an odd prototype', () => {
    const hidden = {};
    Object.defineProperty(hidden, 'toJSON', { value: () => ({ token: 'hunter2' }), enumerable: false });
    const array = Object.setPrototypeOf([1], { __proto__: Array.prototype, toJSON: () => 'x' }) as unknown;
    for (const odd of [hidden, array, Number.NaN, Number.POSITIVE_INFINITY, new Date(0), Object.create(null)])
      expect(shapeOf({ a: odd })).toContain('!');
  });
});

describe('NewEventChecker', () => {
  it('accepts every scripted event in every mode, unchanged', () => {
    for (const mode of ['full', 'shapes', 'both'] as const) {
      const checker = new NewEventChecker(mode);
      for (const event of [...samples, ...samples]) expect(checker.check(event)).toStrictEqual(event);
    }
  });

  it('refuses a key the contract never named, at any depth, even in a shape it knows without it', () => {
    const checker = primed('shapes');
    fc.assert(
      fc.property(
        fc.constantFrom(...samples),
        fc.nat(),
        fc.string({ minLength: 1, maxLength: 12 }),
        fc.constantFrom<unknown>('hunter2', 7, true, null, { token: 'hunter2' }),
        (event, pick, key, extra) => {
          const paths = objectPaths(event).filter((path) => path[0] !== 'payload' || event.payload !== null);
          const path = paths[pick % paths.length] ?? [];
          // A key the envelope names is not an unnamed field; the envelope's unnamed keys are dropped, never stored.
          fc.pre(
            path.length > 0 ||
              !['kind', 'action_id', 'session_id', 'ticket', 'lane', 'payload', 'classification'].includes(key),
          );
          const smuggled = withKey(event, path, key, extra);
          let stored: NewEvent | undefined;
          try {
            stored = checker.check(smuggled);
          } catch (error) {
            expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
            expect(String((error as Error).message)).not.toContain('hunter2');
            return;
          }
          // Accepted only where the schemas drop the key: it never reaches what is stored.
          expect(JSON.stringify(stored)).not.toContain('hunter2');
          expect(stored).toStrictEqual(validateNewEvent(smuggled));
        },
      ),
      { numRuns: 400 },
    );
  });

  it("refuses a pair's extra element and a hidden toJSON, in a shape it knows without them", () => {
    const checker = primed('shapes');
    const view = acceptedWithView('act_view_0002') as Extract<NewEvent, { kind: 'ACTION_ACCEPTED' }>;
    const requestView = view.payload.request_view as NonNullable<typeof view.payload.request_view>;
    const extra = {
      ...view,
      payload: { ...view.payload, request_view: { ...requestView, headers: [['content-type', 'a', 'hunter2', 'x']] } },
    };
    expect(() => checker.check(extra)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    const payload = { ...view.payload };
    Object.defineProperty(payload, 'toJSON', { value: () => ({ token: 'hunter2' }), enumerable: false });
    const stored = checker.check({ ...view, payload });
    // Checked in full: the schemas' copy is stored, and it has no toJSON.
    expect(JSON.stringify(stored)).not.toContain('hunter2');
  });

  it("freezes, in both, what it hands back as the caller's own object: a change after appending throws in the tests", () => {
    const checker = primed('both');
    const view = acceptedWithView('act_view_0003') as Extract<NewEvent, { kind: 'ACTION_ACCEPTED' }>;
    const stored = checker.check(view);
    expect(stored).toBe(view);
    expect(() => {
      (view.payload as { target: string }).target = 'changed';
    }).toThrow(TypeError);
  });

  it('refuses a value of the wrong type in a known shape', () => {
    const checker = primed('shapes');
    const sent = samples.find((event) => event.kind === 'REQUEST_SENT') as NewEvent;
    const wrong = { ...sent, payload: { ...sent.payload, request_complete: 'yes' } };
    expect(() => checker.check(wrong)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('never remembers a shape the schemas rewrite: an unnamed envelope key is dropped every time', () => {
    const checker = new NewEventChecker('shapes');
    const event = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', payload: {}, secret: 'hunter2' };
    for (let i = 0; i < 3; i++) expect(checker.check(event)).not.toHaveProperty('secret');
  });

  it('skips the schemas for a known shape in production, and fails the test that makes it in both', () => {
    const event = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', ticket: 3, payload: {} };
    const negative = { ...event, ticket: -1 };
    // The values inside a known shape are the tests' to check: production trusts the broker's own code for them.
    const shapes = new NewEventChecker('shapes');
    shapes.check(event);
    expect(shapes.check(negative)).toBe(negative);
    const both = new NewEventChecker('both');
    both.check(event);
    expect(() => both.check(negative)).toThrow(EventChecksDisagree);
    // An unknown shape is the schemas' in every mode.
    expect(() => new NewEventChecker('shapes').check(negative)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'ticket' }),
    );
  });

  it('fails the test, in both, that makes a bad value the first of its shape: production would store it once the shape is known', () => {
    const validated = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', ticket: 3, payload: {} };
    const badValues: unknown[] = [
      { ...validated, ticket: -1 },
      { ...validated, ticket: 1.5 },
      { ...validated, action_id: 'act_x' },
      { ...validated, lane: 'x'.repeat(201) },
      { kind: 'PREFLIGHT_FAILED', action_id: 'act_valid_0001', payload: { field: 'f'.repeat(257) } },
      { kind: 'SESSION_ENDED', action_id: 'ses_valid_0001', payload: { reason: 'vanished' } },
    ];
    for (const bad of badValues) {
      // Production: refused while the shape is new, stored once an event of it was accepted.
      expect(() => new NewEventChecker('shapes').check(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
      expect(() => new NewEventChecker('both').check(bad)).toThrow(EventChecksDisagree);
      expect(() => new NewEventChecker('both').check(bad)).toThrow(/of a new shape/);
      // A test of the schemas' refusal asks for full.
      expect(() => new NewEventChecker('full').check(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
    // The message names the field, never the value.
    const secretish = {
      kind: 'PREFLIGHT_FAILED',
      action_id: 'act_valid_0001',
      payload: { field: 'hunter2'.repeat(40) },
    };
    expect(() => new NewEventChecker('both').check(secretish)).toThrow(/payload\.field/);
    expect(() => new NewEventChecker('both').check(secretish)).not.toThrow(/hunter2/);
  });

  it('refuses as the schemas do, in both, what no event of its shape could pass: the shape check catches it too', () => {
    const validated = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', ticket: 3, payload: {} };
    const view = acceptedWithView('act_view_0004') as Extract<NewEvent, { kind: 'ACTION_ACCEPTED' }>;
    const requestView = view.payload.request_view as NonNullable<typeof view.payload.request_view>;
    const shapeRefusals: unknown[] = [
      { ...validated, payload: { token: 'hunter2' } },
      { ...validated, ticket: '3' },
      { kind: 'PREFLIGHT_FAILED', action_id: 'act_valid_0001', payload: { field: 7 } },
      { kind: 'SESSION_ENDED', action_id: 'ses_valid_0001', payload: {} },
      { kind: 'SESSION_ENDED', action_id: 'ses_valid_0001', payload: { reason: 3 } },
      { ...validated, kind: 'LAUNCHED' },
      { ...validated, action_id: 7 },
      { ...view, payload: { ...view.payload, request_view: { ...requestView, headers: [['a', 'b', 'c', 'd']] } } },
      { ...validated, payload: { correlation_values: { 'not a field name': 'x' } } },
      // A bad value beside a key the envelope drops: that shape is never remembered, so always checked in full.
      { ...validated, ticket: -1, secret: 'hunter2' },
      { ...validated, ticket: -1, toString: 'hunter2' },
      // A bad value in a shape that is not plain data: checked in full every time.
      { ...validated, ticket: Number.NaN },
      // A bad value beside a shape's refusal: no event of this shape passes.
      { ...validated, ticket: -1, payload: { token: 'hunter2' } },
    ];
    for (const refused of shapeRefusals) {
      let thrown: unknown;
      try {
        new NewEventChecker('both').check(refused);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).not.toBeInstanceOf(EventChecksDisagree);
      expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    // A bad value whose event the checks beyond the schemas refuse anyway: production refuses it in every order.
    expect(() => new NewEventChecker('both').check({ ...validated, ticket: -1, action_id: 'ses_valid_0001' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'action_id' }),
    );
  });

  it("tells a value's refusal from a shape's by zod 4's issue codes", () => {
    const requested = (payload: Record<string, unknown>): unknown => ({
      kind: 'CREDENTIAL_REQUESTED',
      action_id: 'crq_valid_0001',
      payload: { purpose: 'deploy', for: { route: 'api' }, session_id: 'ses_valid_0001', ...payload },
    });
    expect(valueIssuesOnly(requested({}))).toBe(false); // nothing refused
    // An option of a union refuses a value alone: another value of the shape passes it.
    expect(valueIssuesOnly(requested({ for: { route: 'r'.repeat(65) } }))).toBe(true);
    expect(valueIssuesOnly(requested({ for: { route: 'api', host: 'h' } }))).toBe(false);
    expect(valueIssuesOnly(requested({ for: { route: 3 } }))).toBe(false);
    // An enum: another member is a value, a number is a shape.
    expect(valueIssuesOnly(requested({ kind: 'password' }))).toBe(true);
    expect(valueIssuesOnly(requested({ kind: 1 }))).toBe(false);
    // An array's length: a shape's up to exactArrayMax elements, a value's past it.
    expect(valueIssuesOnly(requested({ scopes: Array.from({ length: 21 }, () => 's') }))).toBe(true);
    expect(valueIssuesOnly(requested({ scopes: [''] }))).toBe(true);
    expect(
      valueIssuesOnly({
        kind: 'CONFIG_APPLIED',
        action_id: 'cfg_0123456789abcdef',
        payload: {
          digest: `sha256:${'a'.repeat(64)}`,
          by: 'p',
          how: 'edited',
          restart_needed_for: Array.from({ length: 5 }, () => 'operator.port'),
        },
      }),
    ).toBe(false);
  });

  it("still runs the checks no schema states on a known shape: the subject's prefix, a canceller's code, an attested rejection", () => {
    const checker = primed('shapes');
    const validated = samples.find((event) => event.kind === 'PREFLIGHT_VALIDATED') as NewEvent;
    expect(() => checker.check({ ...validated, action_id: 'ses_not_an_action' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'action_id' }),
    );
    const cancelled = samples.find((event) => event.kind === 'CANCELLED' && event.payload.actor.kind === 'person');
    expect(cancelled).toBeDefined();
    const byPersonWithCallerCode = {
      ...(cancelled as NewEvent),
      classification: { ...(cancelled as NewEvent).classification, code: 'CALLER_CANCELLED' },
    };
    expect(() => checker.check(byPersonWithCallerCode)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'classification.code' }),
    );
    const attested = attestedRejection('act_sample_9999', attestClassification('rejected', 'no_effect'));
    checker.check(attested);
    const asRemote = { ...attested, classification: { ...attested.classification, code: 'REMOTE_REJECTED' } };
    expect(() => checker.check(asRemote)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'classification.code' }),
    );
  });

  it('keys a shape by its kind: the same keys under another kind are that kind’s schema’s to judge', () => {
    const checker = new NewEventChecker('shapes');
    checker.check({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', payload: {} });
    expect(() => checker.check({ kind: 'REQUEST_SENT', action_id: 'act_valid_0001', payload: {} })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => checker.check({ kind: 'LAUNCHED', action_id: 'act_valid_0001', payload: {} })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'kind' }),
    );
  });

  it('remembers at most its bound of shapes, and checks the rest in full', () => {
    const checker = new NewEventChecker('shapes', 1);
    const first = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', ticket: 3, payload: {} };
    const second = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', lane: 'a', payload: {} };
    checker.check(first);
    checker.check(second);
    expect(checker.check({ ...first, ticket: -1 })).toMatchObject({ ticket: -1 });
    expect(() => checker.check({ ...second, lane: 'x'.repeat(201) })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'lane' }),
    );
  });

  it('takes its mode from POSTERN_EVENT_CHECKS, shapes unless full or both is named', () => {
    expect(eventChecksFromEnv({})).toBe('shapes');
    expect(eventChecksFromEnv({ POSTERN_EVENT_CHECKS: 'full' })).toBe('full');
    expect(eventChecksFromEnv({ POSTERN_EVENT_CHECKS: 'both' })).toBe('both');
    expect(eventChecksFromEnv({ POSTERN_EVENT_CHECKS: 'none' })).toBe('shapes');
    // The suites run both ways (vitest.config.ts).
    expect(eventChecksFromEnv()).toBe('both');
  });
});

describe('a journal checking by shapes', () => {
  let temp: TempJournal | undefined;
  afterEach(async () => {
    await temp?.dispose();
    temp = undefined;
  });

  it('stores no unnamed payload field, though it has committed the shape without it', async () => {
    temp = await openTempJournal({ eventChecks: 'shapes' });
    const [accepted, validated] = actionPaths.httpNoApproval('act_shape_0001');
    await temp.journal.append(accepted as NewEvent);
    await temp.journal.append(validated as NewEvent);
    const [second] = actionPaths.httpNoApproval('act_shape_0002');
    const smuggled = { ...(second as NewEvent), payload: { ...(second as NewEvent).payload, token: 'hunter2' } };
    await expect(temp.journal.append(smuggled as NewEvent)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'payload',
    });
    await temp.journal.append(second as NewEvent);
    const events = [...temp.journal.subjectEvents('act_shape_0001'), ...temp.journal.subjectEvents('act_shape_0002')];
    expect(events.map((event) => event.kind)).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'ACTION_ACCEPTED']);
    expect(JSON.stringify(events)).not.toContain('hunter2');
  });

  it("fails, in the suites' both, an append of a bad value as the first of its shape; full refuses it as the schemas do", async () => {
    const [accepted] = actionPaths.httpNoApproval('act_shape_0003');
    const bad = { ...(accepted as NewEvent), lane: 'x'.repeat(201) } as NewEvent;
    temp = await openTempJournal();
    await expect(temp.journal.append(bad)).rejects.toBeInstanceOf(EventChecksDisagree);
    await temp.dispose();
    temp = await openTempJournal({ eventChecks: 'full' });
    await expect(temp.journal.append(bad)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'lane' });
    expect(temp.journal.subjectEvents('act_shape_0003')).toEqual([]);
  });
});
