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
} from './validate-new-event.js';

/** Every event of every scripted action path: the shapes the broker's own code makes. */
const samples: NewEvent[] = actionPathNames.flatMap((name, i) =>
  actionPaths[name](`act_sample_${String(i).padStart(4, '0')}`),
);

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

  it('writes a run of one element shape once, so an array of any length has one shape', () => {
    expect(shapeOf({ h: [['a', 'b']] })).toBe(
      shapeOf({
        h: [
          ['a', 'b'],
          ['c', 'd'],
          ['e', 'f'],
        ],
      }),
    );
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
});
