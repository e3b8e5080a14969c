import type { ActionState, ActivityEvent, ApprovalCard, BrokerApi, EventKind } from '../../../broker/contract/index.js';

/** A plausible card for renderer tests; override what the case is about. */
export function cardOf(ticket: number, overrides: Partial<ApprovalCard> = {}): ApprovalCard {
  return {
    ticket,
    action_id: `act_test${String(ticket).padStart(8, '0')}`,
    lane: 'doc-7',
    channel: 'http',
    approval: 'per_call',
    state: 'pending',
    waiting_for_ticket: null,
    text: 'waiting for approval',
    session: {
      session_id: 'ses_1',
      status: 'approved',
      pid: 4242,
      exe: '/usr/bin/node',
      cwd: '/home/ann/project',
      parent_exe: '/bin/bash',
      client_name: 'claude',
      record: 'confirmed',
    },
    target: 'route:docs',
    method: 'POST',
    path: '/docs/7',
    query: [],
    headers: [],
    command: null,
    body_preview: '{"marker":"x"}',
    body_bytes: 14,
    credential: 'docs-token',
    request_fingerprint: `sha256:${'0'.repeat(64)}`,
    accepted_at_ms: 1_700_000_000_000,
    expires_at_ms: 1_700_000_300_000,
    retry_of: null,
    dispatch_recorded: false,
    retry_possible: false,
    retry_until_ms: null,
    ...overrides,
  };
}

type Shown = BrokerApi['actions.show']['output'];

/**
 * An actions.show answer with just what the closure reason reads (state fields, events). Cast, so
 * the fixture does not have to follow every field the contract adds to the answer.
 */
export function shownAction(state: Partial<ActionState>, events: ActivityEvent[]): Shown {
  return {
    state: { outcome: null, outcome_basis: null, code: null, stage: 'card_shown', ...state } as ActionState,
    queue: null,
    events,
  } as Shown;
}

/**
 * A maker of activity rows for one action's events, in `where`'s lane and ticket: each row at its seq, a second per
 * seq after a fixed start, session ses_1, no code.
 */
export function activityRowsOf(
  actionId: string,
  where: { ticket: number | null; lane: string },
): (seq: number, kind: EventKind, summary?: string, outcome?: string | null) => ActivityEvent {
  return (seq, kind, summary = '', outcome = null) => ({
    seq,
    at_ms: 1_700_000_000_000 + seq * 1000,
    kind,
    action_id: actionId,
    session_id: 'ses_1',
    ticket: where.ticket,
    lane: where.lane,
    outcome,
    code: null,
    summary,
    expires_at_ms: null,
  });
}
