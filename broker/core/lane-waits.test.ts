import { describe, expect, it } from 'vitest';
import { laneWaits, type LaneWaitSubject, type LaneWaitTicket } from './lane-waits.js';

const subject = (over: Partial<LaneWaitSubject> = {}): LaneWaitSubject => ({
  ticket: 5,
  ready_at_ms: 1_000,
  dispatched_at_ms: null,
  resolved_at_ms: null,
  ...over,
});
const t = (ticket: number, resolved: number | null): LaneWaitTicket => ({
  ticket,
  action_id: `act_${ticket}`,
  resolved_at_ms: resolved,
});

describe('laneWaits: what one ticket waited for in its lane', () => {
  it.each([
    [
      'the earlier ticket resolved after this one was ready, and then it was sent',
      subject({ dispatched_at_ms: 42_500 }),
      [t(4, 42_000)],
      [{ ticket: 4, action_id: 'act_4', waited_ms: 41_000, ongoing: false }],
    ],
    ['the earlier ticket had resolved before this one was ready: no wait', subject(), [t(4, 900)], []],
    ['resolved exactly when it became ready: no wait', subject(), [t(4, 1_000)], []],
    [
      "still unresolved: ongoing, counted to the journal's newest event",
      subject(),
      [t(4, null)],
      [{ ticket: 4, action_id: 'act_4', waited_ms: 9_000, ongoing: true }],
    ],
    [
      'this one was closed while waiting: the wait ends with it',
      subject({ resolved_at_ms: 3_000 }),
      [t(4, null)],
      [{ ticket: 4, action_id: 'act_4', waited_ms: 2_000, ongoing: false }],
    ],
    [
      'never allowed (no approval yet): it waited for a person, not the lane',
      subject({ ready_at_ms: null }),
      [t(4, null)],
      [],
    ],
    [
      'two earlier tickets, given out of order: each with its own wait, in ticket order',
      subject({ dispatched_at_ms: 8_000 }),
      [t(4, 6_000), t(3, 2_000)],
      [
        { ticket: 3, action_id: 'act_3', waited_ms: 1_000, ongoing: false },
        { ticket: 4, action_id: 'act_4', waited_ms: 5_000, ongoing: false },
      ],
    ],
    ['a later ticket of the lane is never waited for', subject(), [t(6, null), t(5, null)], []],
  ] as const)('when %s', (_when, s, earlier, expected) => {
    expect(laneWaits(s, earlier, 10_000)).toEqual(expected);
  });

  it('when the earlier ticket resolved after this one was already sent (a null-lane overtake), the wait ends at the dispatch', () => {
    expect(laneWaits(subject({ dispatched_at_ms: 4_000 }), [t(4, 9_000)], 10_000)).toEqual([
      { ticket: 4, action_id: 'act_4', waited_ms: 3_000, ongoing: false },
    ]);
  });

  it('when the journal clock is behind the ready time (a clock step), a wait is never negative', () => {
    expect(laneWaits(subject(), [t(4, null)], 500)).toEqual([
      { ticket: 4, action_id: 'act_4', waited_ms: 0, ongoing: true },
    ]);
  });
});
