import { describe, expect, it } from 'vitest';
import { approvalsTally, brokerStopped } from './approvals-tally.js';
import { cardOf } from './test-cards.js';

describe('approvalsTally', () => {
  it('when an approved card waits in its lane, the badge counts only what needs a person and the line names the rest', () => {
    const cards = [
      ...[1, 2, 3, 4, 5].map((t) => cardOf(t, { lane: `doc-${t}` })),
      cardOf(7, { lane: 'doc-6', state: 'approved_waiting', waiting_for_ticket: 6 }),
    ];
    expect(approvalsTally(cards, 0, false)).toEqual({ needYou: 5, text: '5 need you · 1 approved, waiting for #6' });
  });

  it('counts pending credential requests on the badge and says so, and names blocked and sending cards', () => {
    const cards = [
      cardOf(1),
      cardOf(2, { lane: 'a', state: 'blocked_head', expires_at_ms: null }),
      cardOf(3, { lane: 'b', state: 'dispatching' }),
      cardOf(4, { lane: 'c', state: 'approved_waiting', waiting_for_ticket: 9 }),
      cardOf(5, { lane: 'd', state: 'approved_waiting', waiting_for_ticket: 8 }),
    ];
    expect(approvalsTally(cards, 1, false)).toEqual({
      needYou: 2,
      text: '2 need you (1 credential request) · 2 approved, waiting their turn · 1 outcome unknown (blocking its lane) · 1 being sent',
    });
    expect(approvalsTally([cardOf(1)], 0, false).text).toBe('1 needs you');
  });

  it('when the broker is stopped, nothing counts on the badge: no card can be decided', () => {
    expect(approvalsTally([cardOf(1), cardOf(2)], 1, true)).toEqual({
      needYou: 0,
      text: '2 open cards as last listed · the broker stopped: none can be decided',
    });
  });
});

describe('brokerStopped', () => {
  it('holds only for BROKER_UNREACHABLE, not for a refusal the broker answered', () => {
    expect(brokerStopped({ error: { code: 'BROKER_UNREACHABLE', message: 'x' } })).toBe(true);
    expect(brokerStopped({ error: { code: 'UNAUTHENTICATED', message: 'x' } })).toBe(false);
    expect(brokerStopped({ error: null })).toBe(false);
  });
});
