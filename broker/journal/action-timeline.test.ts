import { describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import {
  advanceActionTimeline,
  applyEvent,
  emptyActionTimeline,
  splitActionTarget,
  type ActionTimeline,
} from '../core/index.js';

/** Folds a script the way the journal does, each event one second after the previous one. */
function fold(events: ReturnType<(typeof actionPaths)['httpApproved']>): ActionTimeline {
  let state;
  let timeline = emptyActionTimeline;
  for (const [i, input] of events.entries()) {
    const event = {
      ...input,
      seq: i + 1,
      at_ms: 1_000 * (i + 1),
      session_id: 'ses_test',
      ticket: 1,
      lane: 'lane-a',
    } as JournalEvent;
    state = applyEvent(state, event);
    timeline = advanceActionTimeline(timeline, event, state);
  }
  return timeline;
}

describe("advanceActionTimeline: the moments the action list shows, from the events' own times", () => {
  it('when a person approved it and it settled: who, when decided, dispatched, settled and resolved', () => {
    // accepted 1s, validated 2s, card 3s, approved 4s, authorized 5s, dispatch 6s, …, committed 10s, delivered 11s
    expect(fold(actionPaths.httpApproved('act_a'))).toEqual({
      decided_by: 'person:operator-1',
      decided_at_ms: 4_000,
      decided_seq: 4,
      dispatched_at_ms: 6_000,
      settled_at_ms: 10_000,
      resolved_at_ms: 10_000,
    });
  });

  it('when it expired: nobody decided, and it closed at the expiry', () => {
    expect(fold(actionPaths.expired('act_e'))).toMatchObject({
      decided_by: 'nobody (expired)',
      decided_at_ms: 4_000,
      dispatched_at_ms: null,
      settled_at_ms: 4_000,
      resolved_at_ms: 4_000,
    });
  });

  it('when it was cancelled after approval: the latest decision is the one named', () => {
    expect(fold(actionPaths.cancelledWhileWaiting('act_c'))).toMatchObject({
      decided_by: 'person:operator-1',
      decided_at_ms: 5_000,
      decided_seq: 5,
      settled_at_ms: 5_000,
    });
  });

  it('when it is still in flight: settled and resolved stay null', () => {
    expect(fold(actionPaths.httpApproved('act_f').slice(0, 7))).toMatchObject({
      dispatched_at_ms: 6_000,
      settled_at_ms: null,
      resolved_at_ms: null,
    });
  });

  it('when the outcome was lost and later reconciled: settled at the unknown, resolved only when the lane could move on', () => {
    const t = fold(actionPaths.lostThenReconciled('act_l'));
    expect(t.settled_at_ms).not.toBeNull();
    expect(t.resolved_at_ms).not.toBeNull();
    expect(t.resolved_at_ms ?? 0).toBeGreaterThan(t.settled_at_ms ?? 0);
  });
});

describe('splitActionTarget: the sanitized target as list columns', () => {
  it.each([
    ['route:docs POST /documents/{id}', { name: 'docs', method: 'POST', request: '/documents/{id}' }],
    ['host:build-1 exec sha256:ab', { name: 'build-1', method: null, request: 'exec sha256:ab' }],
    ['route:(unknown)', { name: '(unknown)', method: null, request: '' }],
    [`route:r GET /${'x'.repeat(500)}`, { name: 'r', method: 'GET', request: `/${'x'.repeat(399)}…` }],
  ])('%s', (target, parts) => {
    expect(splitActionTarget(target)).toEqual(parts);
  });
});
