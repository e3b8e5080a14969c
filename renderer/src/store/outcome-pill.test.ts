import { describe, expect, it } from 'vitest';
import { rowOf } from './action-list-row.test-support.js';
import { outcomePill } from './outcome-pill.js';

describe("an action's outcome pill", () => {
  it('is green only for a committed success; a committed HTTP 500 says it failed, in the error colour', () => {
    expect(outcomePill(rowOf(1))).toEqual({ text: 'committed', tone: 'succeeded' });
    expect(outcomePill(rowOf(2, { effect: 'failed', code: 'REMOTE_ERROR_STATUS' }))).toEqual({
      text: 'committed · failed',
      tone: 'failed',
    });
    expect(outcomePill(rowOf(3, { effect: 'partial_effect' }))).toEqual({
      text: 'committed · partial effect',
      tone: 'uncertain',
    });
    expect(outcomePill(rowOf(4, { effect: 'unknown_effect' })).tone).toBe('uncertain');
  });

  it('colours a refusal as an error, an unknown outcome as a warning and a not-attempted one muted', () => {
    expect(outcomePill(rowOf(1, { outcome: 'rejected', effect: 'rejected' }))).toEqual({
      text: 'rejected',
      tone: 'rejected',
    });
    expect(outcomePill(rowOf(2, { outcome: 'unknown', effect: 'unknown_effect' })).tone).toBe('unknown');
    expect(outcomePill(rowOf(3, { outcome: 'not_attempted', effect: 'no_effect' })).tone).toBe('not_attempted');
  });

  it('an open action, waiting on a card or in flight, is neutral, not the error colour', () => {
    const open = rowOf(1, { settled_at_ms: null, outcome: null, effect: null, stage: 'card_shown' });
    expect(outcomePill(open)).toEqual({ text: 'open · card shown', tone: 'open' });
  });
});
