import { describe, expect, it } from 'vitest';
import {
  actionCountsOf,
  countedAction,
  counterDelta,
  outcomeRowsOf,
  restingActionCountsOf,
  type CountedFields,
  type CounterKey,
  type CounterRow,
  type MinuteRow,
} from './action-counters.js';

const minuteMs = 60_000;
const t0 = 29_453_760 * minuteMs;

const open: CountedFields = {
  phase: null,
  outcome: null,
  code: null,
  decision: 'pending',
  dispatch_seq: null,
  recorded: false,
  updated_at_ms: t0,
};
const dispatched: CountedFields = { ...open, decision: 'approved', dispatch_seq: 6, updated_at_ms: t0 + 10 };
const committed: CountedFields = {
  ...dispatched,
  phase: 'remote_execution',
  outcome: 'committed',
  recorded: true,
  updated_at_ms: t0 + 20,
};
const openKey: CounterKey = {
  phase: null,
  outcome: null,
  code: null,
  decision: 'pending',
  dispatched: 0,
  in_flight: 1,
};
const committedKey: CounterKey = {
  phase: 'remote_execution',
  outcome: 'committed',
  code: null,
  decision: 'approved',
  dispatched: 1,
  in_flight: 0,
};

describe('countedAction', () => {
  it.each([
    ['open before dispatch: in flight, no minute', open, { key: openKey, minute: null }],
    [
      'dispatched, unclassified: in flight',
      dispatched,
      { key: { ...openKey, decision: 'approved', dispatched: 1 }, minute: null },
    ],
    ['classified and recorded: its minute by integer division', committed, { key: committedKey, minute: 29_453_760 }],
    [
      'dispatched, classified but not recorded (recovery made it unknown): still in flight',
      { ...committed, outcome: 'unknown', recorded: false, updated_at_ms: t0 + minuteMs - 1 },
      { key: { ...committedKey, outcome: 'unknown', in_flight: 1 }, minute: 29_453_760 },
    ],
    [
      'closed before dispatch, not recorded: not in flight (never dispatched, outcome set)',
      {
        ...open,
        phase: 'validation',
        outcome: 'not_attempted',
        code: 'INVALID_ARGUMENT',
        updated_at_ms: t0 + minuteMs,
      },
      {
        key: { ...openKey, phase: 'validation', outcome: 'not_attempted', code: 'INVALID_ARGUMENT', in_flight: 0 },
        minute: 29_453_761,
      },
    ],
  ])('when %s', (_, fields, expected) => {
    expect(countedAction(fields)).toEqual(expected);
  });
});

describe('counterDelta', () => {
  it.each([
    [
      'a new action: one count up, no minute while unclassified',
      undefined,
      open,
      { counts: [{ key: openKey, n: 1 }], minutes: [] },
    ],
    [
      'nothing counted changed (an observation): no writes',
      open,
      { ...open, updated_at_ms: t0 + 5 },
      { counts: [], minutes: [] },
    ],
    [
      'it dispatched: the old key down, the new one up',
      open,
      dispatched,
      {
        counts: [
          { key: openKey, n: -1 },
          { key: { ...openKey, decision: 'approved', dispatched: 1 }, n: 1 },
        ],
        minutes: [],
      },
    ],
    [
      'it was classified: the count moves and its minute counts it',
      dispatched,
      committed,
      {
        counts: [
          { key: { ...openKey, decision: 'approved', dispatched: 1 }, n: -1 },
          { key: committedKey, n: 1 },
        ],
        minutes: [{ minute: 29_453_760, key: committedKey, n: 1 }],
      },
    ],
    [
      'a classified action changed again within the same minute: nothing',
      committed,
      { ...committed, updated_at_ms: t0 + 30 },
      { counts: [], minutes: [] },
    ],
    [
      'a classified action changed in a later minute: it moves minute, the count stays',
      committed,
      { ...committed, updated_at_ms: t0 + 3 * minuteMs },
      {
        counts: [],
        minutes: [
          { minute: 29_453_760, key: committedKey, n: -1 },
          { minute: 29_453_763, key: committedKey, n: 1 },
        ],
      },
    ],
    [
      'only in_flight changed (recorded after recovery): the count moves, and the minute from its in-flight row to a counted one',
      { ...committed, recorded: false },
      committed,
      {
        counts: [
          { key: { ...committedKey, in_flight: 1 }, n: -1 },
          { key: committedKey, n: 1 },
        ],
        minutes: [
          { minute: 29_453_760, key: { ...committedKey, in_flight: 1 }, n: -1 },
          { minute: 29_453_760, key: committedKey, n: 1 },
        ],
      },
    ],
    [
      'reclassified in the same minute (unknown, then committed by reconciliation): both move',
      { ...committed, outcome: 'unknown' },
      committed,
      {
        counts: [
          { key: { ...committedKey, outcome: 'unknown' }, n: -1 },
          { key: committedKey, n: 1 },
        ],
        minutes: [
          { minute: 29_453_760, key: { ...committedKey, outcome: 'unknown' }, n: -1 },
          { minute: 29_453_760, key: committedKey, n: 1 },
        ],
      },
    ],
  ])('when %s', (_, before, after, expected) => {
    expect(counterDelta(before === undefined ? undefined : countedAction(before), countedAction(after))).toEqual(
      expected,
    );
  });
});

describe('actionCountsOf', () => {
  it('sums totals, in-flight keys and settled unknown outcomes (a running one is in flight only); nothing counted is all zeros', () => {
    const rows: CounterRow[] = [
      { ...openKey, n: 4 },
      { ...committedKey, n: 10 },
      // Dispatched and running: the row says unknown from DISPATCH_STARTED on, yet nothing settled it.
      { ...committedKey, outcome: 'unknown', in_flight: 1, n: 2 },
      { ...committedKey, outcome: 'unknown', n: 1 },
    ];
    expect(actionCountsOf(rows)).toEqual({ total: 17, in_flight: 6, unknown: 1 });
    expect(actionCountsOf([])).toEqual({ total: 0, in_flight: 0, unknown: 0 });
  });
});

describe('restingActionCountsOf (read from the file, no broker running it)', () => {
  it('counts a dispatched action with no outcome recorded as unknown (dispatched_unrecorded), never in flight', () => {
    const rows: CounterRow[] = [
      { ...openKey, n: 4 },
      { ...committedKey, n: 10 },
      // Dispatched, cut or crashed: nothing runs it now, so its outcome is unknown (DESIGN §2).
      { ...committedKey, outcome: 'unknown', in_flight: 1, n: 2 },
      { ...committedKey, outcome: 'unknown', n: 1 },
    ];
    expect(restingActionCountsOf(rows)).toEqual({ total: 17, in_flight: 4, unknown: 3, dispatched_unrecorded: 2 });
    expect(restingActionCountsOf([])).toEqual({ total: 0, in_flight: 0, unknown: 0, dispatched_unrecorded: 0 });
  });
});

describe('outcomeRowsOf', () => {
  const newest = 1_000;
  const minute = (m: number, n: number, key: CounterKey = committedKey): MinuteRow => ({ ...key, minute: m, n });

  it('splits each key into its minutes within the hour up to the newest and one row for the rest', () => {
    const rows = outcomeRowsOf(
      [
        { ...committedKey, n: 7 },
        { ...committedKey, in_flight: 1, n: 1 },
        { ...openKey, n: 3 },
      ],
      // 940 is an hour before the newest (outside), 941 the first minute inside; 900 awaits pruning;
      // a zero row is skipped.
      [minute(newest, 2), minute(941, 1), minute(940, 1), minute(900, 1), minute(999, 0)],
    );
    const { in_flight: _, ...rateKey } = committedKey;
    expect(rows).toEqual([
      { ...rateKey, minute: newest, n: 2 },
      { ...rateKey, minute: 941, n: 1 },
      { ...rateKey, minute: null, n: 4 },
      { phase: null, outcome: null, code: null, decision: 'pending', dispatched: 0, minute: null, n: 3 },
      { ...rateKey, minute: null, n: 1, in_flight: 1 },
    ]);
  });

  it('gives the dispatched ones not settled yet rows of their own (open), the rest row giving them back', () => {
    const unknownKey: CounterKey = { ...committedKey, outcome: 'unknown' };
    const { in_flight: _, ...rateKey } = unknownKey;
    // One settled unknown and one running, both changed in the newest minute: the minute row holds both.
    const rows = outcomeRowsOf(
      [
        { ...unknownKey, n: 1 },
        { ...unknownKey, in_flight: 1, n: 1 },
      ],
      [minute(newest, 2, unknownKey)],
    );
    expect(rows).toEqual([
      { ...rateKey, minute: newest, n: 2 },
      { ...rateKey, minute: null, n: -1 },
      { ...rateKey, minute: null, n: 1, in_flight: 1 },
    ]);
  });

  it("gives a running one's minute within the hour as an in-flight row, which may be the newest minute", () => {
    const unknownKey: CounterKey = { ...committedKey, outcome: 'unknown' };
    const { in_flight: _, ...committedRate } = committedKey;
    const { in_flight: __, ...unknownRate } = unknownKey;
    // Settled ones 30 and 61 minutes before a dispatch still running, and one running since an hour before it.
    const rows = outcomeRowsOf(
      [
        { ...committedKey, n: 2 },
        { ...unknownKey, in_flight: 1, n: 2 },
      ],
      [minute(newest - 30, 1), minute(newest - 61, 1), minute(newest, 1, { ...unknownKey, in_flight: 1 })],
    );
    expect(rows).toEqual([
      { ...committedRate, minute: newest - 30, n: 1 },
      { ...unknownRate, minute: newest, n: 1, in_flight: 1 },
      { ...committedRate, minute: null, n: 1 },
      { ...unknownRate, minute: null, n: 1, in_flight: 1 },
    ]);
  });

  it('leaves out a key whose every action is in the window, and is empty with no counters', () => {
    const rows = outcomeRowsOf([{ ...committedKey, n: 2 }], [minute(newest, 2)]);
    expect(rows.map((r) => r.minute)).toEqual([newest]);
    expect(outcomeRowsOf([], [])).toEqual([]);
  });
});
