import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import { cardOf } from '../store/test-cards.js';
import { ClosedCards } from './approvals-view.js';
import { renderView, textOf } from './render-test-support.js';

/** The closed cards list of the Approvals view, with `closed` as the cards that closed since the page opened. */
function renderClosed(closed: ReturnType<typeof cardOf>[]): { html: string; text: string } {
  const entries = closed.map((card) => ({
    card,
    reason: { headline: 'committed', detail: '', seq: null },
    lookupError: null,
    plain: null,
  }));
  const html = renderView(createElement(ClosedCards, { closed: entries }));
  return { html, text: textOf(html) };
}

describe('the closed cards list', () => {
  it('labels the lane and names the target apart, so a lane named like a route is never read as one', () => {
    const { text } = renderClosed([
      cardOf(4, { lane: 'doc-7', target: 'route:docs', method: 'POST', path: '/docs/7' }),
      cardOf(5, { lane: null, target: 'route:docs', method: 'GET', path: '/docs' }),
      cardOf(6, {
        lane: 'host:lab',
        channel: 'ssh',
        target: 'host:lab',
        method: null,
        path: null,
        command: 'uptime',
      }),
    ]);
    expect(text).toContain('#4 lane doc-7 · route:docs POST /docs/7 — committed');
    expect(text).toContain('#5 a read outside lanes · route:docs GET /docs — committed');
    expect(text).toContain('#6 lane host:lab · host:lab $ uptime — committed');
  });

  it('says validation refusals never had a card, and where they are', () => {
    const { html, text } = renderClosed([cardOf(4)]);
    expect(text).toContain('Cards only. A call refused at validation');
    expect(text).toContain('postern actions list --outcome not_attempted');
    expect(html).toContain('href="#/activity/actions"');
  });

  it('when no card has closed yet: shows the list saying none has, and where validation refusals are', () => {
    const { html, text } = renderClosed([]);
    expect(html).toContain('data-testid="closed-cards"');
    expect(text).toContain('Closed since this page opened | No card has closed since this page opened. | Cards only.');
    expect(text).toContain('postern actions list --outcome not_attempted');
    expect(html).toContain('href="#/activity/actions"');
    expect(html).not.toContain('<ul>');
    // Once one has, the list holds it and no longer says none has.
    const { html: one } = renderClosed([cardOf(4)]);
    expect(one).toContain('data-testid="closed-4"');
    expect(one).not.toContain('closed-cards-empty');
  });
});

describe('a closed card whose events are sealed', () => {
  const locked = {
    code: 'AUDIT_KEY_UNAVAILABLE',
    message: 'events of run 2 (an earlier broker run) need the unlocked vault',
  };
  const row = { outcome: 'not_attempted', code: 'BROKER_RESTARTED', stage: 'closed' };
  function renderSealed(lookupError: typeof locked & { sealed_for_good?: true }): { html: string; text: string } {
    const entry = { card: cardOf(4), reason: null, lookupError, plain: row as never };
    const html = renderView(createElement(ClosedCards, { closed: [entry] }));
    return { html, text: textOf(html) };
  }

  it('while an unlock opens them (an earlier keyed run): says how it closed and links the unlock', () => {
    const { html, text } = renderSealed(locked);
    expect(text).toContain(
      'not_attempted (BROKER_RESTARTED); its events are sealed while the vault is locked: unlock to read its events',
    );
    expect(html).toContain('href="#/vault"');
  });

  it("sealed for good (a run that never had a key): says so, in the agent's words, and offers no unlock", () => {
    const { html, text } = renderSealed({ ...locked, sealed_for_good: true });
    expect(text).toContain(
      'not_attempted (BROKER_RESTARTED); its events are sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them',
    );
    expect(text).not.toContain('unlock to read');
    expect(html).not.toContain('href="#/vault"');
  });
});
