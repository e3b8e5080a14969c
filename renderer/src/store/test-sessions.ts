import type { SessionSummary } from '../../../broker/contract/index.js';

/** A plausible sessions.list entry for renderer tests, confirmed and pending; override what the case is about. */
export function sessionOf(id: string, overrides: Partial<SessionSummary> = {}): SessionSummary {
  return {
    session_id: id,
    status: 'pending',
    pid: 100,
    uid: 1000,
    start_time: '1',
    ppid: 1,
    exe: '/usr/bin/node',
    cwd: '/work',
    parent_exe: null,
    client_name: null,
    client_version: null,
    allowlist_withheld: null,
    approved_by: null,
    revoked_by: null,
    revoke_reason: null,
    end_reason: null,
    first_seq: 1,
    last_seq: 1,
    started_at_ms: 1_000,
    ended_at_ms: null,
    updated_at_ms: 1_000,
    approved_at_ms: null,
    reconnects: 0,
    calls: 0,
    pending: 0,
    connected: true,
    record: 'confirmed',
    ...overrides,
  };
}
