import { describe, expect, it } from 'vitest';
import type { EventKind, JournalEvent, NewEvent } from '../contract/index.js';
import { filterActivity, foldActivity, foldSessions } from './activity.js';

/** Interleaves scripts round-robin and stamps seq/at_ms as the journal would (ticket, session copied). */
function log(...scripts: Array<{ events: NewEvent[]; session: string | null }>): JournalEvent[] {
  const out: JournalEvent[] = [];
  const queues = scripts.map((s) => ({ ...s, events: [...s.events] }));
  while (queues.some((q) => q.events.length > 0)) {
    for (const q of queues) {
      const e = q.events.shift();
      if (e === undefined) continue;
      const seq = out.length + 1;
      out.push({
        ...e,
        seq,
        at_ms: 1_000 + seq,
        session_id: q.session,
        ticket: null,
        lane: e.lane ?? null,
      } as JournalEvent);
    }
  }
  return out;
}

/** The folds read only the envelope (ids, kind, positions), so payloads stay empty here. */
function script(id: string, kinds: EventKind[]): NewEvent[] {
  return kinds.map((kind) => ({ kind, action_id: id, payload: {} }) as unknown as NewEvent);
}

const sent: EventKind[] = [
  'ACTION_ACCEPTED',
  'PREFLIGHT_VALIDATED',
  'CREDENTIAL_AUTHORIZED',
  'DISPATCH_STARTED',
  'REQUEST_SENT',
  'REMOTE_RESPONSE_STARTED',
  'OUTPUT_RECEIVED',
  'REMOTE_RESPONSE_COMPLETE',
  'RESULT_COMMITTED',
  'RESULT_DELIVERED',
];
const a = { events: script('act_view_a001', sent), session: 'ses_1' };
const b = {
  events: script('act_view_b001', ['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'CARD_SHOWN', 'REJECTED']),
  session: 'ses_2',
};
const c = {
  events: script('act_view_c001', ['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'CARD_SHOWN', 'EXPIRED']),
  session: 'ses_1',
};

describe('foldActivity', () => {
  it.each([
    ['an empty log', [], []],
    ['one action', log(a), [['act_view_a001', 1, 10]]],
    [
      'interleaved actions, in order of first event',
      log(a, b, c),
      [
        ['act_view_a001', 1, expect.any(Number)],
        ['act_view_b001', 2, expect.any(Number)],
        ['act_view_c001', 3, expect.any(Number)],
      ],
    ],
  ])('when given %s', (_when, events, expected) => {
    expect(foldActivity(events).map((x) => [x.action_id, x.first_seq, x.last_seq])).toEqual(expected);
  });

  it("keeps each action's events in append order with their original positions", () => {
    const events = log(a, b);
    const [first] = foldActivity(events);
    expect(first?.events.map((e) => e.seq)).toEqual(
      events.filter((e) => e.action_id === 'act_view_a001').map((e) => e.seq),
    );
  });

  it('refuses a log that is not in append order', () => {
    const events = log(a);
    expect(() => foldActivity([events[1], events[0]] as JournalEvent[])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'seq' }),
    );
  });
});

describe('foldSessions', () => {
  it.each([
    ['an empty log', [], []],
    [
      'two sessions, one with two actions',
      log(a, b, c),
      [
        ['ses_1', ['act_view_a001', 'act_view_c001']],
        ['ses_2', ['act_view_b001']],
      ],
    ],
    ['events with no session', log({ ...a, session: null }), [[null, ['act_view_a001']]]],
  ])('when given %s', (_when, events, expected) => {
    expect(foldSessions(events).map((s) => [s.session_id, s.action_ids])).toEqual(expected);
  });

  it('counts events and spans append positions and wall time', () => {
    const events = log(a, b);
    const [s1] = foldSessions(events);
    const mine = events.filter((e) => e.session_id === 'ses_1');
    expect(s1).toMatchObject({
      events: mine.length,
      first_seq: mine[0]?.seq,
      last_seq: mine.at(-1)?.seq,
      first_at_ms: mine[0]?.at_ms,
    });
  });
});

describe('filterActivity', () => {
  const events = log(a, b, c);
  it.each([
    [
      'by action',
      { action_id: 'act_view_b001' },
      events.filter((e) => e.action_id === 'act_view_b001').map((e) => e.seq),
    ],
    ['by session', { session_id: 'ses_2' }, events.filter((e) => e.session_id === 'ses_2').map((e) => e.seq)],
    ['by kind', { kinds: new Set(['ACTION_ACCEPTED']) }, [1, 2, 3]],
    ['by range', { fromSeq: 4, toSeq: 6 }, [4, 5, 6]],
    ['with nothing matching', { action_id: 'act_none_0001' }, []],
  ])('%s keeps the original seq numbers (never renumbered)', (_when, filter, seqs) => {
    expect(filterActivity(events, filter).map((e) => e.seq)).toEqual(seqs);
  });
});
