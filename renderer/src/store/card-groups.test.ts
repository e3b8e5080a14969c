import { describe, expect, it } from 'vitest';
import { cardStatusLabel, groupCardsByLane, needsDecision, stoppedCardLabel } from './card-groups.js';
import { cardOf } from './test-cards.js';

describe('groupCardsByLane', () => {
  it('groups by lane, lanes in name order and tickets in ticket order, whatever order the reply had', () => {
    const groups = groupCardsByLane([
      cardOf(9, { lane: 'doc-b' }),
      cardOf(12, { lane: 'doc-a' }),
      cardOf(5, { lane: 'doc-b' }),
      cardOf(7, { lane: 'doc-a' }),
    ]);
    expect(groups.map((g) => [g.lane, g.cards.map((c) => c.ticket)])).toEqual([
      ['doc-a', [7, 12]],
      ['doc-b', [5, 9]],
    ]);
  });

  it('puts the reads that bypass lanes (lane null) last, as one group', () => {
    const groups = groupCardsByLane([cardOf(3, { lane: null }), cardOf(4, { lane: 'zz' }), cardOf(1, { lane: null })]);
    expect(groups.map((g) => [g.lane, g.cards.map((c) => c.ticket)])).toEqual([
      ['zz', [4]],
      [null, [1, 3]],
    ]);
  });

  it('marks a lane whose head is an unknown outcome as blocked by that ticket', () => {
    const [lane] = groupCardsByLane([
      cardOf(8, { state: 'approved_waiting', waiting_for_ticket: 6 }),
      cardOf(6, { state: 'blocked_head', expires_at_ms: null }),
    ]);
    expect(lane?.blockedBy).toBe(6);
  });

  it('when the head is only pending or dispatching, the lane is not blocked', () => {
    expect(groupCardsByLane([cardOf(1, { state: 'dispatching' }), cardOf(2)])[0]?.blockedBy).toBeNull();
    expect(groupCardsByLane([cardOf(1)])[0]?.blockedBy).toBeNull();
  });

  it('returns no groups for no cards and never mutates its input', () => {
    expect(groupCardsByLane([])).toEqual([]);
    const cards = Object.freeze([cardOf(2), cardOf(1)]);
    groupCardsByLane(cards);
    expect(cards.map((c) => c.ticket)).toEqual([2, 1]);
  });
});

describe('cardStatusLabel', () => {
  it.each([
    [
      'an approved card behind an unresolved one',
      cardOf(43, { state: 'approved_waiting', waiting_for_ticket: 42 }),
      null,
      'approved, waiting for #42',
    ],
    [
      'an approval-none card behind one',
      cardOf(43, { state: 'approved_waiting', approval: 'none', waiting_for_ticket: 42 }),
      null,
      'waiting for #42',
    ],
    ['a pending head', cardOf(42), null, 'waiting for approval'],
    [
      'a pending card behind another',
      cardOf(43, { waiting_for_ticket: 42 }),
      null,
      'waiting for approval (behind #42)',
    ],
    [
      'a card of a pending session',
      cardOf(43, { state: 'awaiting_session', waiting_for_ticket: 42 }),
      null,
      'waiting for session approval (behind #42)',
    ],
    [
      'an approved card behind an unknown head',
      cardOf(43, { state: 'approved_waiting', waiting_for_ticket: 41 }),
      41,
      'approved, blocked by #41 (outcome unknown)',
    ],
    [
      'a pending card behind an unknown head',
      cardOf(43, { waiting_for_ticket: 41 }),
      41,
      'waiting for approval; blocked by #41 (outcome unknown)',
    ],
    [
      'the unknown head itself',
      cardOf(41, { state: 'blocked_head' }),
      41,
      '#41 outcome unknown: the lane is blocked until it is settled or abandoned',
    ],
    [
      'a dispatching head (the broker line)',
      cardOf(41, { state: 'dispatching', text: '#41 dispatched, waiting for its outcome' }),
      null,
      '#41 dispatched, waiting for its outcome',
    ],
  ])("for %s it reads the broker's line", (_what, card, blockedBy, label) => {
    expect(cardStatusLabel(card, blockedBy)).toBe(label);
  });

  it('names the ticket waited for, not the lane head, when several wait', () => {
    expect(cardStatusLabel(cardOf(50, { state: 'approved_waiting', waiting_for_ticket: 49 }), null)).toBe(
      'approved, waiting for #49',
    );
  });
});

describe('needsDecision', () => {
  it('is true only for pending and awaiting-session cards', () => {
    const states = ['pending', 'awaiting_session', 'approved_waiting', 'blocked_head', 'dispatching'] as const;
    expect(states.filter((state) => needsDecision(cardOf(1, { state })))).toEqual(['pending', 'awaiting_session']);
  });
});

describe('stoppedCardLabel', () => {
  it('says what the next start does to each kind of card (docs/queue.md "What a restart does")', () => {
    for (const state of ['pending', 'awaiting_session', 'approved_waiting'] as const)
      expect(stoppedCardLabel(cardOf(1, { state }))).toContain(
        'cannot be decided until it answers again. A restart closes it unsent (not_attempted, BROKER_RESTARTED)',
      );
    expect(stoppedCardLabel(cardOf(1, { state: 'dispatching' }))).toContain('a restart records it as unknown');
    expect(stoppedCardLabel(cardOf(1, { state: 'blocked_head' }))).toContain('The lane stays blocked across a restart');
  });
});
