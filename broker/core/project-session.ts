import {
  actorLabel,
  CodedError,
  transitionRefusalOf,
  TransitionRefused,
  type JournalEvent,
  type SessionState,
  type TransitionRefusalKind,
} from '../contract/index.js';
import type { Folded } from './project.js';

/**
 * applySessionEvent for the journal's compare-and-swap: a lost race (approved, revoked or ended
 * meanwhile; the same process started twice) is a refusal value; a bug still throws.
 */
export function foldSessionEvent(state: SessionState | undefined, event: JournalEvent): Folded<SessionState> {
  try {
    return { ok: true, state: applySessionEvent(state, event) };
  } catch (error) {
    const refusal = transitionRefusalOf(error);
    if (refusal === undefined) throw error;
    return { ok: false, refusal };
  }
}

/**
 * A session's current state as a pure fold of its SESSION_* events in append order. Rules: a
 * session starts once; approval happens once and only while pending; a revoked or ended session
 * never comes back (a new process is a new session); ending is recorded once; each reconnection of a
 * pending or approved session is counted.
 */
export function applySessionEvent(state: SessionState | undefined, event: JournalEvent): SessionState {
  if (state === undefined) {
    if (event.kind !== 'SESSION_STARTED')
      return impossible(event, 'the first event of a session must be SESSION_STARTED');
    const p = event.payload;
    return {
      session_id: event.action_id,
      status: 'pending',
      pid: p.pid,
      uid: p.uid,
      start_time: p.start_time,
      ppid: p.ppid,
      exe: p.exe,
      cwd: p.cwd,
      parent_exe: p.parent_exe,
      client_name: p.client_name,
      client_version: p.client_version,
      allowlist_withheld: p.allowlist_withheld ?? null,
      approved_by: null,
      revoked_by: null,
      revoke_reason: null,
      end_reason: null,
      first_seq: event.seq,
      last_seq: event.seq,
      started_at_ms: event.at_ms,
      ended_at_ms: null,
      updated_at_ms: event.at_ms,
      approved_at_ms: null,
      reconnects: 0,
    };
  }
  if (event.action_id !== state.session_id)
    return impossible(event, `event for ${event.action_id} folded into ${state.session_id}`);
  if (event.seq <= state.last_seq) return impossible(event, `seq ${event.seq} is not after ${state.last_seq}`);
  const next: SessionState = { ...state, last_seq: event.seq, updated_at_ms: event.at_ms };
  switch (event.kind) {
    case 'SESSION_STARTED':
      return refused('session_exists', event, 'a session starts once');
    case 'SESSION_APPROVED':
      if (state.status !== 'pending')
        return refused('session_not_pending', event, `approval of a session that is ${state.status}`);
      next.status = 'approved';
      next.approved_by = actorLabel(event.payload.actor);
      next.approved_at_ms = event.at_ms;
      break;
    case 'SESSION_REVOKED':
      if (state.status !== 'pending' && state.status !== 'approved')
        return refused('session_closed', event, `revocation of a session that is ${state.status}`);
      next.status = 'revoked';
      next.revoked_by = actorLabel(event.payload.actor);
      next.revoke_reason = event.payload.reason;
      break;
    case 'SESSION_ENDED':
      if (state.ended_at_ms !== null) return refused('session_ended', event, 'a session ends once');
      // A revoked session stays revoked in status; its end is still recorded.
      if (state.status !== 'revoked') next.status = 'ended';
      next.end_reason = event.payload.reason;
      next.ended_at_ms = event.at_ms;
      break;
    case 'SESSION_RECONNECTED':
      // Only a live session is reopened: openSession refuses a revoked or ended one before appending.
      if (state.status !== 'pending' && state.status !== 'approved')
        return refused('session_closed', event, `reconnection of a session that is ${state.status}`);
      next.reconnects = state.reconnects + 1;
      break;
    default:
      return impossible(event, `${event.kind} is an action event, not a session event`);
  }
  return next;
}

/** Folds session events (any number of sessions) in append order; other kinds are skipped. */
export function projectSessions(events: Iterable<JournalEvent>): Map<string, SessionState> {
  const states = new Map<string, SessionState>();
  for (const event of events) {
    if (!event.action_id.startsWith('ses_')) continue;
    states.set(event.action_id, applySessionEvent(states.get(event.action_id), event));
  }
  return states;
}

/** A lost race: right for the session its writer read, refused for the one that is durable now. */
function refused(kind: TransitionRefusalKind, event: JournalEvent, why: string): never {
  const message = `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}`;
  throw new TransitionRefused({ kind, code: 'IMPOSSIBLE_TRANSITION', message });
}

function impossible(event: JournalEvent, why: string): never {
  throw new CodedError('IMPOSSIBLE_TRANSITION', `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}`);
}
