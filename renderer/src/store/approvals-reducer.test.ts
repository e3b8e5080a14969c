import { describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../../../broker/contract/index.js';
import {
  approvalsReducer,
  closedCardsMax,
  closuresToRead,
  initialApprovalsView,
  type ApprovalsView,
} from './approvals-reducer.js';
import { cardOf, shownAction } from './test-cards.js';

const listed = (view: ApprovalsView, cards: ApprovalCard[]): ApprovalsView =>
  approvalsReducer(view, { type: 'received', reply: { ok: true, value: { cards } } });
const failure = { ok: false as const, error: { code: 'BROKER_UNREACHABLE', message: 'down' } };

describe('approvalsReducer', () => {
  it('when cards arrive, it is ready with them', () => {
    const view = listed(approvalsReducer(initialApprovalsView, { type: 'requested' }), [cardOf(1), cardOf(2)]);
    expect(view).toMatchObject({ phase: 'ready', error: null, replies: 1, closed: [] });
    expect(view.cards.map((c) => c.ticket)).toEqual([1, 2]);
  });

  it('when a refresh fails, it keeps the last cards beside the error', () => {
    const view = approvalsReducer(listed(initialApprovalsView, [cardOf(1)]), { type: 'received', reply: failure });
    expect(view).toMatchObject({ phase: 'error', error: failure.error, replies: 2 });
    expect(view.cards.map((c) => c.ticket)).toEqual([1]);
  });

  it('when a card is no longer listed, it moves to closed (newest first) waiting for its reason', () => {
    const view = listed(listed(initialApprovalsView, [cardOf(1), cardOf(2), cardOf(3)]), [cardOf(2)]);
    expect(view.closed.map((e) => [e.card.ticket, e.reason])).toEqual([
      [3, null],
      [1, null],
    ]);
    expect(closuresToRead(view).map((e) => e.card.ticket)).toEqual([3, 1]);
  });

  it('when the reason is read, the closed card shows it and is not read again', () => {
    const closed = listed(listed(initialApprovalsView, [cardOf(1)]), []);
    const events = [
      {
        seq: 9,
        at_ms: 0,
        kind: 'EXPIRED' as const,
        action_id: 'a',
        session_id: null,
        ticket: 1,
        lane: 'doc-7',
        outcome: null,
        code: null,
        summary: '',
        expires_at_ms: null,
      },
    ];
    const view = approvalsReducer(closed, {
      type: 'closure_read',
      ticket: 1,
      reply: { ok: true, value: shownAction({}, events) },
    });
    expect(view.closed[0]?.reason).toMatchObject({ headline: 'expired', seq: 9 });
    expect(closuresToRead(view)).toEqual([]);
  });

  it('when reading the reason fails, it keeps the card and the error, and reads it again later', () => {
    const view = approvalsReducer(listed(listed(initialApprovalsView, [cardOf(1)]), []), {
      type: 'closure_read',
      ticket: 1,
      reply: failure,
    });
    expect(view.closed[0]).toMatchObject({ reason: null, lookupError: failure.error });
    expect(closuresToRead(view)).toHaveLength(1);
  });

  it('when its events are sealed: read again while an unlock may open them, never once they are sealed for good', () => {
    const closed = listed(listed(initialApprovalsView, [cardOf(1)]), []);
    const locked = { code: 'AUDIT_KEY_UNAVAILABLE', message: 'events of run 2 need the unlocked vault' };
    const read = (error: typeof locked & { sealed_for_good?: true }) =>
      approvalsReducer(closed, { type: 'closure_read', ticket: 1, reply: { ok: false, error } });
    expect(closuresToRead(read(locked))).toHaveLength(1);
    expect(closuresToRead(read({ ...locked, sealed_for_good: true }))).toEqual([]);
  });

  it('when a closed ticket is listed again, it leaves closed', () => {
    const view = listed(listed(listed(initialApprovalsView, [cardOf(1)]), []), [cardOf(1)]);
    expect(view.closed).toEqual([]);
  });

  it('when a refresh fails, nothing is taken for closed', () => {
    const view = approvalsReducer(listed(initialApprovalsView, [cardOf(1)]), { type: 'received', reply: failure });
    expect(view.closed).toEqual([]);
  });

  it(`keeps at most ${closedCardsMax} closed cards, the newest`, () => {
    const many = Array.from({ length: closedCardsMax + 10 }, (_, i) => cardOf(i + 1));
    const view = listed(listed(initialApprovalsView, many), []);
    expect(view.closed).toHaveLength(closedCardsMax);
    expect(view.closed[0]?.card.ticket).toBe(closedCardsMax + 10);
  });

  it('tracks one call per ticket: busy while it runs, then its result', () => {
    const started = approvalsReducer(initialApprovalsView, { type: 'call_started', ticket: 4, call: 'approve' });
    expect(started.calls.busy[4]).toBe('approve');
    const conflict = { ok: false as const, error: { code: 'DECISION_CONFLICT', message: 'ticket #4 already expired' } };
    const done = approvalsReducer(started, {
      type: 'call_finished',
      ticket: 4,
      call: 'approve',
      reply: conflict,
      message: '',
    });
    expect(done.calls.busy[4]).toBeUndefined();
    expect(done.calls.last[4]).toEqual({ call: 'approve', ok: false, error: conflict.error });
    const again = approvalsReducer(done, { type: 'call_started', ticket: 4, call: 'reject' });
    expect(again.calls.last[4]).toBeUndefined();
  });

  it('never mutates the view it was given', () => {
    const before = Object.freeze(listed(initialApprovalsView, [cardOf(1)]));
    const copy = structuredClone(before);
    listed(before, []);
    approvalsReducer(before, { type: 'call_started', ticket: 1, call: 'approve' });
    expect(before).toEqual(copy);
  });
});
