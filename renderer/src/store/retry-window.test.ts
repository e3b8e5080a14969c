import { describe, expect, it } from 'vitest';
import { clockTime, retryOffer } from './retry-window.js';
import { cardOf } from './test-cards.js';

// Local times (the renderer shows the person's clock): built from local parts, so the cases hold in any time zone.
const at = (h: number, m: number, s = 0, day = 3) => new Date(2026, 11, day, h, m, s).getTime();
const blockedHead = (retryUntilMs: number | null, retryPossible = true) =>
  cardOf(41, {
    state: 'blocked_head',
    dispatch_recorded: true,
    retry_possible: retryPossible,
    retry_until_ms: retryUntilMs,
  });

describe("a blocked head's same-key retry, by the card's key window and the renderer's clock", () => {
  it('inside the window: offered, saying until when', () => {
    expect(retryOffer(blockedHead(at(14, 32, 40)), at(14, 1))).toEqual({
      offered: true,
      text: 'Retry with the same key possible until 14:32.',
    });
    // One ms before the end is still inside: the journal leases a same-key retry before the key's expiry.
    expect(retryOffer(blockedHead(at(14, 32)), at(14, 32) - 1)).toMatchObject({ offered: true });
  });

  it("at and after the window's end: no Retry, and the card says the key's window has passed", () => {
    for (const now of [at(14, 32), at(14, 32) + 1, at(18, 0)]) {
      const offer = retryOffer(blockedHead(at(14, 32)), now);
      expect(offer).toEqual({
        offered: false,
        why: 'No retry: the idempotency key’s window for #41 passed at 14:32, so the broker would refuse a retry with the same key (nothing would be sent). Reconcile, attest or abandon it.',
      });
    }
  });

  it('a window ending on another day names its date', () => {
    expect(retryOffer(blockedHead(at(9, 5, 0, 4)), at(23, 50))).toEqual({
      offered: true,
      text: 'Retry with the same key possible until 2026-12-04 09:05.',
    });
  });

  it('no retry possible: the reason the card gives, whatever the window says', () => {
    expect(retryOffer(blockedHead(null, false), at(14, 0))).toMatchObject({
      offered: false,
      why: expect.stringContaining('kept under its idempotency key'),
    });
    const undispatched = { ...blockedHead(null, false), dispatch_recorded: false };
    expect(retryOffer(undispatched, at(14, 0))).toMatchObject({
      offered: false,
      why: expect.stringContaining('no dispatch of #41 is recorded'),
    });
  });

  it('clockTime cuts to the minute, never rounding up past the end', () => {
    expect(clockTime(at(14, 32, 59), at(8, 0))).toBe('14:32');
    expect(clockTime(at(0, 7), at(23, 59, 0, 2))).toBe('2026-12-03 00:07');
  });
});
