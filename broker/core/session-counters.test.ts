import { describe, expect, it } from 'vitest';
import { sessionCountDelta, sessionCounted, type SessionCountChange, type SessionCountedFields } from './index.js';

const open = (session_id: string | null): SessionCountedFields => ({ session_id, outcome: null, dispatch_seq: null });
const sent = (session_id: string | null): SessionCountedFields => ({ session_id, outcome: null, dispatch_seq: 7 });
const closed = (session_id: string | null): SessionCountedFields => ({
  session_id,
  outcome: 'not_attempted',
  dispatch_seq: null,
});

describe('sessionCounted', () => {
  it.each([
    ['open before dispatch', open('ses_a'), 1],
    ['dispatched, no outcome yet', sent('ses_a'), 0],
    ['closed before dispatch', closed('ses_a'), 0],
    ['dispatched and classified', { session_id: 'ses_a', outcome: 'committed', dispatch_seq: 7 }, 0],
  ] as const)('when %s, pending is %i', (_, fields, pending) => {
    expect(sessionCounted(fields)).toEqual({ session_id: 'ses_a', pending });
  });
});

describe('sessionCountDelta', () => {
  it.each<[string, SessionCountedFields | undefined, SessionCountedFields, SessionCountChange[]]>([
    ['a new open action', undefined, open('ses_a'), [{ session_id: 'ses_a', calls: 1, pending: 1 }]],
    ['a new action already closed', undefined, closed('ses_a'), [{ session_id: 'ses_a', calls: 1, pending: 0 }]],
    ['a new action of no session', undefined, open(null), []],
    ['an open action dispatched', open('ses_a'), sent('ses_a'), [{ session_id: 'ses_a', calls: 0, pending: -1 }]],
    ['an open action closed', open('ses_a'), closed('ses_a'), [{ session_id: 'ses_a', calls: 0, pending: -1 }]],
    ['a dispatched action settled', sent('ses_a'), closed('ses_a'), []],
    ['an open action moving on before dispatch', open('ses_a'), open('ses_a'), []],
    ['an action of no session changing', open(null), sent(null), []],
    [
      'an action moved to another session',
      open('ses_a'),
      sent('ses_b'),
      [
        { session_id: 'ses_a', calls: -1, pending: -1 },
        { session_id: 'ses_b', calls: 1, pending: 0 },
      ],
    ],
    ['an action leaving its session', sent('ses_a'), sent(null), [{ session_id: 'ses_a', calls: -1, pending: 0 }]],
  ])('when %s', (_, before, after, changes) => {
    expect(sessionCountDelta(before === undefined ? undefined : sessionCounted(before), sessionCounted(after))).toEqual(
      changes,
    );
  });
});
