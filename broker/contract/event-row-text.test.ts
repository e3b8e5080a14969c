import { describe, expect, it } from 'vitest';
import { eventRowCells, rowMatchesText, shownSummary } from './event-row-text.js';
import type { ActivityEvent } from './operator-api.js';

const expires = Date.UTC(2026, 11, 3, 17, 28, 33, 825);

const cardRow: ActivityEvent = {
  seq: 7,
  at_ms: expires - 300_000,
  kind: 'CARD_SHOWN',
  action_id: 'act_card_0000001',
  session_id: 'ses_alpha',
  ticket: 42,
  lane: 'deploy-prod',
  outcome: null,
  code: null,
  summary: 'expires at 2026-12-03T17:28:33.825Z',
  expires_at_ms: expires,
};

describe('shownSummary: an event summary as the console writes it', () => {
  it("writes a CARD_SHOWN's expiry as every console time, in the viewer's zone with the zone named, never ISO", () => {
    expect(shownSummary(cardRow, { zone: 'Europe/Berlin' })).toBe('expires at 2026-12-03 18:28:33 CET');
    expect(shownSummary(cardRow, { zone: 'America/New_York' })).toBe('expires at 2026-12-03 12:28:33 GMT-5');
    expect(shownSummary(cardRow, { zone: 'UTC' })).toBe('expires at 2026-12-03 17:28:33 UTC');
  });

  it('keeps every other summary as the broker wrote it', () => {
    const sent = { kind: 'DISPATCH_STARTED', summary: 'attempt 1 on a fresh connection', expires_at_ms: null } as const;
    expect(shownSummary(sent, { zone: 'Europe/Berlin' })).toBe('attempt 1 on a fresh connection');
  });
});

describe('the Text filter matches the row as its reader sees it', () => {
  const berlin = { zone: 'Europe/Berlin' };

  it('writes the cells the Events view renders, the evidence in the given zone', () => {
    expect(eventRowCells(cardRow, berlin)).toEqual({
      kind: 'CARD_SHOWN',
      action: 'act_card_0000001',
      ticket: '#42',
      lane: 'deploy-prod',
      session: 'ses_alpha',
      outcome: '',
      code: '',
      evidence: 'expires at 2026-12-03 18:28:33 CET',
    });
    expect(eventRowCells(cardRow, 'terminal').evidence).toBe('expires at 2026-12-03T17:28:33.825Z');
  });

  it('finds a card by the local expiry it shows, never by the UTC time it does not', () => {
    expect(rowMatchesText(cardRow, '18:28', berlin)).toBe(true);
    expect(rowMatchesText(cardRow, '2026-12-03 18:28:33 cet', berlin)).toBe(true);
    expect(rowMatchesText(cardRow, '17:28', berlin)).toBe(false);
    expect(rowMatchesText(cardRow, 'T17:28:33.825Z', berlin)).toBe(false);
    expect(rowMatchesText(cardRow, '12:28:33 GMT-5', { zone: 'America/New_York' })).toBe(true);
  });

  it('keeps matching what else the row shows: kind, action, ticket, lane, session, outcome, code', () => {
    const failed: ActivityEvent = {
      ...cardRow,
      kind: 'REMOTE_RESPONSE_STARTED',
      outcome: 'rejected',
      code: 'REMOTE_ERROR_STATUS',
      summary: 'HTTP 500',
      expires_at_ms: null,
    };
    for (const text of ['remote_response', 'ACT_CARD', '#42', 'deploy-prod', 'ses_alpha', 'rejected', 'error_status'])
      expect(rowMatchesText(failed, text, berlin), text).toBe(true);
    expect(rowMatchesText(failed, 'http 500', berlin)).toBe(true);
    expect(rowMatchesText(failed, 'HTTP 404', berlin)).toBe(false);
  });

  it('for the terminal (no zone named), matches the summary as it prints it, ISO UTC', () => {
    expect(rowMatchesText(cardRow, 'T17:28:33.825Z', 'terminal')).toBe(true);
    expect(rowMatchesText(cardRow, '18:28', 'terminal')).toBe(false);
  });
});
