import type { NewEvent } from '../contract/index.js';

/**
 * A SESSION_STARTED for session `id` of a node agent with process `pid` (its start time derived from the pid), as the
 * agent backend appends it; `payload` overrides fields.
 */
export function sessionStartedEvent(
  id: string,
  pid: number,
  payload: Partial<Extract<NewEvent, { kind: 'SESSION_STARTED' }>['payload']> = {},
): NewEvent {
  return {
    kind: 'SESSION_STARTED',
    action_id: id,
    payload: {
      pid,
      uid: 1000,
      start_time: `${pid}00`,
      ppid: 1,
      exe: '/usr/bin/node',
      cwd: '/home/ann',
      parent_exe: null,
      client_name: 'claude',
      client_version: '1',
      ...payload,
    },
  };
}

/** A SESSION_RECONNECTED of session `id` (one per MCP initialize of its process), as the agent backend appends it. */
export function sessionReconnectedEvent(id: string, clientName = 'agent'): NewEvent {
  return { kind: 'SESSION_RECONNECTED', action_id: id, payload: { client_name: clientName, client_version: '1' } };
}

/** One action's events as the broker appends them, in `session` (null: an action no agent session asked for). */
export function inSession(events: readonly NewEvent[], session: string | null): NewEvent[] {
  return events.map((e) => {
    if (e.kind !== 'ACTION_ACCEPTED') return e;
    const { session_id: _dropped, ...rest } = e;
    return session === null ? rest : { ...rest, session_id: session };
  });
}
