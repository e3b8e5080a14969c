import { describe, expect, it } from 'vitest';
import type { SessionSummary } from '../../../broker/contract/index.js';
import {
  initialSessionsView,
  orderSessions,
  pendingSessionCount,
  sessionApprovalUse,
  sessionsReducer,
  sessionStanding,
} from './sessions-reducer.js';
import { sessionOf } from './test-sessions.js';

const session = (id: string, status: SessionSummary['status'], startedAtMs: number): SessionSummary =>
  sessionOf(id, { status, started_at_ms: startedAtMs, updated_at_ms: startedAtMs });

describe('sessions', () => {
  it('orders those waiting for a person first, then live, revoked and ended; newest first within each', () => {
    const ordered = orderSessions([
      session('a', 'ended', 5),
      session('b', 'approved', 1),
      session('c', 'pending', 2),
      session('d', 'approved', 3),
      session('e', 'revoked', 9),
    ]);
    expect(ordered.map((s) => s.session_id)).toEqual(['c', 'd', 'b', 'e', 'a']);
  });

  it('counts the sessions waiting for approval', () => {
    expect(
      pendingSessionCount([session('a', 'pending', 1), session('b', 'approved', 1), session('c', 'pending', 1)]),
    ).toBe(2);
  });

  it('keeps the last list beside a refresh error', () => {
    const ready = sessionsReducer(initialSessionsView, {
      type: 'received',
      reply: { ok: true, value: { sessions: [session('a', 'pending', 1)] } },
    });
    const failed = sessionsReducer(ready, {
      type: 'received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'down' } },
    });
    expect(failed).toMatchObject({ phase: 'error', replies: 2, error: { code: 'BROKER_UNREACHABLE' } });
    expect(failed.sessions).toHaveLength(1);
  });

  it('tracks a revoke on its row: busy, then its result', () => {
    const started = sessionsReducer(initialSessionsView, { type: 'call_started', sessionId: 'a', call: 'revoke' });
    expect(started.calls.busy['a']).toBe('revoke');
    const done = sessionsReducer(started, {
      type: 'call_finished',
      sessionId: 'a',
      call: 'revoke',
      reply: { ok: true, value: {} },
      message: 'session revoked',
    });
    expect(done.calls).toEqual({ busy: {}, last: { a: { call: 'revoke', ok: true, message: 'session revoked' } } });
  });
});

describe('what approving a session would change', () => {
  const perCallOnly = {
    routes: [
      { name: 'docs', approval: 'per_call' },
      { name: 'status', approval: 'none' },
    ],
    ssh_hosts: [{ name: 'web-1', approval: 'per_call', commands: 0 }],
  };
  const withSession = {
    routes: [
      { name: 'docs', approval: 'session' },
      { name: 'wiki', approval: 'per_call', rules: [{ approval: 'session' }] },
    ],
    ssh_hosts: [],
  };

  it('when no entry uses approval: session, a pending agent is not "pending": no Approve, and the badge does not count it', () => {
    const use = sessionApprovalUse(perCallOnly);
    expect(use).toEqual({ known: true, entries: [], maybe: [] });
    const standing = sessionStanding(session('a', 'pending', 1), use);
    expect(standing).toMatchObject({ label: 'no approval needed', tone: 'not_needed', approvable: false });
    expect(standing.explanation).toContain('would change nothing');
    expect(standing.explanation).toContain('per_call calls still get a card each');
    expect(pendingSessionCount([session('a', 'pending', 1)], use)).toBe(0);
  });

  it('when a route (or one of its rules) uses approval: session, Approve names what it lets through', () => {
    const use = sessionApprovalUse(withSession);
    expect(use.entries).toEqual(['docs', 'wiki']);
    const standing = sessionStanding({ ...session('a', 'pending', 1), pending: 2 }, use);
    expect(standing).toMatchObject({ label: 'pending', approvable: true });
    expect(standing.explanation).toContain('calls on docs, wiki run without a card');
    expect(standing.explanation).toContain('2 of its calls are not sent yet');
    expect(pendingSessionCount([session('a', 'pending', 1), session('b', 'approved', 2)], use)).toBe(1);
  });

  it('when an SSH host has command rules config.show does not itemize, approval may matter: Approve stays', () => {
    const use = sessionApprovalUse({ routes: [], ssh_hosts: [{ name: 'web-1', approval: 'per_call', commands: 2 }] });
    expect(use.maybe).toEqual(['ssh web-1']);
    expect(sessionStanding(session('a', 'pending', 1), use)).toMatchObject({ approvable: true });
  });

  it('before the configuration is read, a pending session keeps its Approve (the broker may need it)', () => {
    const use = sessionApprovalUse(null);
    expect(sessionStanding(session('a', 'pending', 1), use)).toMatchObject({ label: 'pending', approvable: true });
    expect(pendingSessionCount([session('a', 'pending', 1)])).toBe(1);
  });

  it('approved, revoked and ended sessions never offer Approve, and say what holds', () => {
    const none = sessionApprovalUse(perCallOnly);
    expect(sessionStanding(session('a', 'approved', 1), none).explanation).toContain('changes nothing yet');
    expect(sessionStanding(session('a', 'approved', 1), sessionApprovalUse(withSession)).explanation).toContain(
      'calls on docs, wiki run without a card',
    );
    expect(sessionStanding(session('a', 'revoked', 1), none)).toMatchObject({ approvable: false, label: 'revoked' });
    expect(sessionStanding(session('a', 'ended', 1), none)).toMatchObject({ approvable: false, label: 'ended' });
  });

  it('a session whose record the journal has not confirmed is the file’s word: never “approved”, never approvable, not counted', () => {
    const use = sessionApprovalUse(withSession);
    const forged = { ...session('a', 'approved', 1), approved_by: 'person:ann', record: 'unconfirmed' as const };
    expect(sessionStanding(forged, use)).toMatchObject({
      label: 'unconfirmed',
      tone: 'unconfirmed',
      approvable: false,
    });
    expect(sessionStanding(forged, use).explanation).toContain(
      'the journal file says approved, approved by person:ann), which any process of this user could have edited',
    );
    const pendingUnchecked = { ...session('b', 'pending', 2), record: 'unconfirmed' as const };
    expect(sessionStanding(pendingUnchecked, use)).toMatchObject({ label: 'unconfirmed', approvable: false });
    expect(pendingSessionCount([pendingUnchecked], use)).toBe(0);
    const refuted = { ...session('c', 'approved', 3), record: 'unverifiable' as const };
    expect(sessionStanding(refuted, use).explanation).toContain('its own sealed events do not confirm it');
    const withheld = { ...session('d', 'approved', 4), record: 'approval_withheld' as const };
    expect(sessionStanding(withheld, use)).toMatchObject({ label: 'approval not used', approvable: false });
    // Withheld matters only while an approval could be acted on: an ended one reads as ended.
    expect(sessionStanding({ ...withheld, status: 'ended' }, use)).toMatchObject({ label: 'ended' });
  });
});
