import { describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { applySessionEvent, projectSessions } from './project-session.js';

const person = { kind: 'person' as const, id: 'ann' };
let seq = 0;
function ev(kind: JournalEvent['kind'], payload: unknown, id = 'ses_process_1'): JournalEvent {
  seq += 1;
  return {
    kind,
    action_id: id,
    session_id: id,
    ticket: null,
    lane: null,
    seq,
    at_ms: 1000 + seq,
    payload,
  } as JournalEvent;
}
const startedPayload = {
  pid: 10,
  uid: 1000,
  start_time: '555',
  ppid: 1,
  exe: '/usr/bin/node',
  cwd: '/w',
  parent_exe: '/usr/bin/claude',
  client_name: 'claude-code',
  client_version: '2',
};

describe('the session projection', () => {
  it('starts pending, is approved once, revoked once, and ends once', () => {
    let s = applySessionEvent(undefined, ev('SESSION_STARTED', startedPayload));
    expect(s).toMatchObject({
      status: 'pending',
      pid: 10,
      start_time: '555',
      parent_exe: '/usr/bin/claude',
      client_name: 'claude-code',
      ended_at_ms: null,
    });
    s = applySessionEvent(s, ev('SESSION_APPROVED', { actor: person }));
    expect(s).toMatchObject({ status: 'approved', approved_by: 'person:ann' });
    expect(() => applySessionEvent(s, ev('SESSION_APPROVED', { actor: person }))).toThrow(
      /approval of a session that is approved/,
    );
    s = applySessionEvent(s, ev('SESSION_REVOKED', { actor: person, reason: 'stop' }));
    expect(s).toMatchObject({ status: 'revoked', revoked_by: 'person:ann', revoke_reason: 'stop' });
    expect(() => applySessionEvent(s, ev('SESSION_APPROVED', { actor: person }))).toThrow(/IMPOSSIBLE|revoked/);
    s = applySessionEvent(s, ev('SESSION_ENDED', { reason: 'process_exited' }));
    expect(s.status).toBe('revoked');
    expect(s.end_reason).toBe('process_exited');
    expect(() => applySessionEvent(s, ev('SESSION_ENDED', { reason: 'process_exited' }))).toThrow(/ends once/);
  });

  it('refuses a session that was never started, a second start, an action kind and out-of-order events', () => {
    expect(() => applySessionEvent(undefined, ev('SESSION_APPROVED', { actor: person }))).toThrow(
      /must be SESSION_STARTED/,
    );
    const s = applySessionEvent(undefined, ev('SESSION_STARTED', startedPayload, 'ses_other_1'));
    expect(() => applySessionEvent(s, ev('SESSION_STARTED', startedPayload, 'ses_other_1'))).toThrow(/starts once/);
    expect(() => applySessionEvent(s, ev('PREFLIGHT_VALIDATED', {}, 'ses_other_1'))).toThrow(/action event/);
    expect(() => applySessionEvent(s, { ...ev('SESSION_APPROVED', { actor: person }, 'ses_other_1'), seq: 1 })).toThrow(
      /not after/,
    );
  });

  it('counts each reconnection of a pending or approved session, and refuses one of a revoked or ended session', () => {
    const reconnected = { client_name: 'claude-code', client_version: '2' };
    let s = applySessionEvent(undefined, ev('SESSION_STARTED', startedPayload, 'ses_again_1'));
    expect(s.reconnects).toBe(0);
    s = applySessionEvent(s, ev('SESSION_RECONNECTED', reconnected, 'ses_again_1'));
    expect(s).toMatchObject({ status: 'pending', reconnects: 1 });
    s = applySessionEvent(s, ev('SESSION_APPROVED', { actor: person }, 'ses_again_1'));
    s = applySessionEvent(s, ev('SESSION_RECONNECTED', reconnected, 'ses_again_1'));
    expect(s).toMatchObject({ status: 'approved', reconnects: 2 });
    const ended = applySessionEvent(s, ev('SESSION_ENDED', { reason: 'process_exited' }, 'ses_again_1'));
    expect(() => applySessionEvent(ended, ev('SESSION_RECONNECTED', reconnected, 'ses_again_1'))).toThrow(
      /reconnection of a session that is ended/,
    );
    const revoked = applySessionEvent(s, ev('SESSION_REVOKED', { actor: person, reason: 'stop' }, 'ses_again_1'));
    expect(() => applySessionEvent(revoked, ev('SESSION_RECONNECTED', reconnected, 'ses_again_1'))).toThrow(
      /that is revoked/,
    );
  });

  it('projectSessions folds only session subjects and keeps one state per session', () => {
    const events = [
      ev('SESSION_STARTED', startedPayload, 'ses_a_000001'),
      ev('SESSION_STARTED', startedPayload, 'ses_b_000001'),
      ev('SESSION_ENDED', { reason: 'broker_found_gone' }, 'ses_a_000001'),
    ];
    const action = { ...ev('PREFLIGHT_VALIDATED', {}, 'act_000000001') };
    const states = projectSessions([...events, action]);
    expect([...states.keys()]).toEqual(['ses_a_000001', 'ses_b_000001']);
    expect(states.get('ses_a_000001')?.status).toBe('ended');
  });
});
