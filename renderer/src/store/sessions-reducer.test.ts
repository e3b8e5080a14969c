import { describe, expect, it } from 'vitest';
import type { SessionSummary } from '../../../broker/contract/index.js';
import { initialSessionsView, orderSessions, pendingSessionCount, sessionsReducer } from './sessions-reducer.js';

const session = (id: string, status: SessionSummary['status'], startedAtMs: number): SessionSummary => ({
  session_id: id,
  status,
  pid: 100,
  uid: 1000,
  start_time: '1',
  ppid: 1,
  exe: '/usr/bin/node',
  cwd: '/work',
  parent_exe: null,
  client_name: null,
  client_version: null,
  approved_by: null,
  revoked_by: null,
  revoke_reason: null,
  end_reason: null,
  first_seq: 1,
  last_seq: 1,
  started_at_ms: startedAtMs,
  ended_at_ms: null,
  updated_at_ms: startedAtMs,
  calls: 0,
  pending: 0,
  connected: true,
});

describe('sessions', () => {
  it('orders those waiting for a person first, then live, revoked and ended; newest first within each', () => {
    const ordered = orderSessions([session('a', 'ended', 5), session('b', 'approved', 1), session('c', 'pending', 2), session('d', 'approved', 3), session('e', 'revoked', 9)]);
    expect(ordered.map((s) => s.session_id)).toEqual(['c', 'd', 'b', 'e', 'a']);
  });

  it('counts the sessions waiting for approval', () => {
    expect(pendingSessionCount([session('a', 'pending', 1), session('b', 'approved', 1), session('c', 'pending', 1)])).toBe(2);
  });

  it('keeps the last list beside a refresh error', () => {
    const ready = sessionsReducer(initialSessionsView, { type: 'received', reply: { ok: true, value: { sessions: [session('a', 'pending', 1)] } } });
    const failed = sessionsReducer(ready, { type: 'received', reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'down' } } });
    expect(failed).toMatchObject({ phase: 'error', replies: 2, error: { code: 'BROKER_UNREACHABLE' } });
    expect(failed.sessions).toHaveLength(1);
  });

  it('tracks a revoke on its row: busy, then its result', () => {
    const started = sessionsReducer(initialSessionsView, { type: 'call_started', sessionId: 'a', call: 'revoke' });
    expect(started.calls.busy['a']).toBe('revoke');
    const done = sessionsReducer(started, { type: 'call_finished', sessionId: 'a', call: 'revoke', reply: { ok: true, value: {} }, message: 'session revoked' });
    expect(done.calls).toEqual({ busy: {}, last: { a: { call: 'revoke', ok: true, message: 'session revoked' } } });
  });
});
