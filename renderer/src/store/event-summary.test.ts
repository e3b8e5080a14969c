import { describe, expect, it } from 'vitest';
import { shownSummary } from './event-summary.js';

const expires = Date.UTC(2026, 11, 3, 17, 28, 33, 825);

describe('shownSummary: an event summary as the console writes it', () => {
  it("writes a CARD_SHOWN's expiry as every console time, in the viewer's zone with the zone named, never ISO", () => {
    const card = {
      kind: 'CARD_SHOWN',
      summary: 'expires at 2026-12-03T17:28:33.825Z',
      expires_at_ms: expires,
    } as const;
    expect(shownSummary(card, { zone: 'Europe/Berlin' })).toBe('expires at 2026-12-03 18:28:33 CET');
    expect(shownSummary(card, { zone: 'America/New_York' })).toBe('expires at 2026-12-03 12:28:33 GMT-5');
    expect(shownSummary(card, { zone: 'UTC' })).toBe('expires at 2026-12-03 17:28:33 UTC');
  });

  it('keeps every other summary as the broker wrote it', () => {
    const sent = { kind: 'DISPATCH_STARTED', summary: 'attempt 1 on a fresh connection', expires_at_ms: null } as const;
    expect(shownSummary(sent, { zone: 'Europe/Berlin' })).toBe('attempt 1 on a fresh connection');
  });
});
