import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import type { SessionSummary } from '../../../broker/contract/index.js';
import { sessionApprovalUse } from '../store/sessions-reducer.js';
import { sessionOf } from '../store/test-sessions.js';
import { renderView, textOf } from './render-test-support.js';
import { SessionCard } from './sessions-view.js';

/** An approved session, confirmed unless the case says otherwise. */
const summary = (id: string, overrides: Partial<SessionSummary>): SessionSummary =>
  sessionOf(id, {
    status: 'approved',
    pid: 4242,
    start_time: '424200',
    last_seq: 2,
    approved_by: 'person:ann (web, operator session)',
    approved_at_ms: 1_000,
    ...overrides,
  });

/** One session's card as React renders it, where approval: session is in use. */
const cardHtml = (session: SessionSummary): string =>
  renderView(createElement(SessionCard, { session, use: sessionApprovalUse(withSessionRoute) }));
const withSessionRoute = { routes: [{ name: 'docs', approval: 'session' }], ssh_hosts: [] };

describe('a session’s card (THREAT-MODEL 3: only a person decides, and the page never says one did when it cannot know)', () => {
  it('shows an earlier run’s row its events have not confirmed as the file’s word, not as a person’s approval, with no Approve', () => {
    const own = textOf(cardHtml(summary('ses_own', {})));
    expect(own).toContain('approved by person:ann (web, operator session)');
    expect(own).not.toContain('unconfirmed');
    const forged = cardHtml(summary('ses_forged', { pid: 5151, record: 'unconfirmed' }));
    expect(forged).toContain('data-record="unconfirmed"');
    expect(forged).toContain('tone-unconfirmed');
    const text = textOf(forged);
    expect(text).toContain('the file says approved by person:ann (web, operator session), unconfirmed');
    expect(text).not.toMatch(/· approved by person:ann/);
    expect(text).toContain('which open only while the vault is unlocked');
    // The same row confirmed pending offers Approve; unconfirmed it does not (a decision needs the journal's record).
    expect(cardHtml(summary('ses_p', { status: 'pending', approved_by: null }))).toContain('>Approve<');
    expect(cardHtml(summary('ses_q', { status: 'pending', approved_by: null, record: 'unconfirmed' }))).not.toContain(
      '>Approve<',
    );
  });

  it('marks every word of an unconfirmed row that names who decided as the file’s: who revoked it and why', () => {
    const revoked = {
      status: 'revoked' as const,
      approved_by: null,
      revoked_by: 'person:ann (web, operator session)',
      revoke_reason: 'Ann revoked it',
    };
    const forged = textOf(cardHtml(summary('ses_rev_file', { ...revoked, record: 'unconfirmed' })));
    expect(forged).toContain(
      'the file says revoked by person:ann (web, operator session), revoked: Ann revoked it, unconfirmed',
    );
    const own = textOf(cardHtml(summary('ses_rev_own', revoked)));
    expect(own).toContain('revoked by person:ann (web, operator session) · revoked: Ann revoked it');
    expect(own).not.toContain('the file says');
  });
});
