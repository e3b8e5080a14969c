import { createElement } from 'react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cardOf } from '../store/test-cards.js';
import { dateTime } from '../../../broker/contract/time-words.js';
import { ApprovalCardView } from './approval-card.js';
import { renderView, textOf } from './render-test-support.js';

const cardText = (card: ReturnType<typeof cardOf>): string =>
  textOf(renderView(createElement(ApprovalCardView, { card, blockedBy: null })));

describe('an approval card', () => {
  it('an SSH card rebuilt after a restart (no command kept) says so as postern approvals list does, never a blank', () => {
    const card = cardOf(7, {
      channel: 'ssh',
      lane: 'host:lab',
      target: 'host:lab',
      method: null,
      path: null,
      command: null,
      body_preview: null,
      body_bytes: 0,
      state: 'blocked_head',
      request_fingerprint: `sha256:${'ab'.repeat(32)}`,
    });
    const text = cardText(card);
    expect(text).toContain(
      `Command | command not kept: the journal holds only its digest sha256:${'ab'.repeat(32)}; action ${card.action_id}, accepted ${dateTime(card.accepted_at_ms)}`,
    );
    expect(text).not.toContain('(not shown)');
  });
});

describe("an approval card's query and headers", () => {
  const render = (overrides: Parameters<typeof cardOf>[1]): string =>
    renderView(createElement(ApprovalCardView, { card: cardOf(8, overrides), blockedBy: null }));

  it("counts the pairs the broker did not show apart from the agent's pairs, from the broker's own count", () => {
    const html = render({
      query: [
        ['a', '1'],
        ['…', '2 more not shown', { pairs_hidden: 2 }],
      ],
      headers: [
        ['x-a', '1'],
        ['…', '1 more not shown', { pairs_hidden: 1 }],
      ],
    });
    const text = textOf(html);
    expect(text).toContain('Query | a: 1 | 2 more query parameters not shown');
    expect(text).toContain('Headers | x-a: 1 | 1 more header not shown');
    expect(html).toContain('data-testid="card-8-query-more"');
    expect(text).not.toContain('2 more not shown');
  });

  it('an agent\'s query parameter named "…" valued "6 more not shown" is listed as its pair, never as the count', () => {
    const html = render({ query: [['…', '6 more not shown']] });
    expect(textOf(html)).toContain('Query | …: 6 more not shown');
    expect(html).not.toContain('card-8-query-more');
    expect(textOf(html)).not.toMatch(/more query parameters? not shown/);
  });
});

describe("an approval card's countdown", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('names the expiry in its tooltip as every console time: local, 24-hour, the zone named', () => {
    // A fixed zone, the viewer's (Node reads TZ again when it is set): the test means the same in any zone it runs in.
    vi.stubEnv('TZ', 'Europe/Berlin');
    const expires = Date.UTC(2026, 11, 3, 17, 28, 33);
    const html = renderView(
      createElement(ApprovalCardView, {
        card: cardOf(9, { state: 'pending', expires_at_ms: expires }),
        blockedBy: null,
      }),
    );
    expect(html).toContain('title="Expires at 2026-12-03 18:28:33 CET"');
    expect(html).toContain(`title="Expires at ${dateTime(expires)}"`);
  });
});

describe('an approval card rebuilt from the journal whose query and headers are sealed', () => {
  const details = (request_details: 'sealed' | 'sealed_for_good'): string =>
    cardText(cardOf(9, { state: 'blocked_head', query: [], headers: [], request_details }));

  it('while an unlock shows them (an earlier keyed run): says to unlock', () => {
    expect(details('sealed')).toContain(
      'Query, headers | not shown: sealed in the journal by an earlier run of the broker, and the vault is locked. Unlock it',
    );
  });

  it('sealed for good (a run that never had a key): says no unlock opens them', () => {
    const text = details('sealed_for_good');
    expect(text).toContain(
      'Query, headers | not shown: sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them',
    );
    expect(text).not.toContain('Unlock it');
  });
});

describe("an approval card's agent line", () => {
  it('says when the session status is an earlier run’s row its events have not confirmed, and nothing when confirmed', () => {
    const confirmed = cardText(cardOf(9));
    expect(confirmed).toContain('session approved');
    expect(confirmed).not.toContain('unconfirmed');
    const base = cardOf(10);
    const forged = cardOf(10, { session: base.session === null ? null : { ...base.session, record: 'unconfirmed' } });
    expect(cardText(forged)).toContain(
      "session approved (unconfirmed: the journal file's word, not yet checked against its sealed events)",
    );
  });
});
