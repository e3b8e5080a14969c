import Database from 'better-sqlite3';
import type { ActionState } from '../contract/index.js';
import { ticketStanding } from '../core/index.js';

/** Every column of one `actions` row as the journal file holds it now: what another process of the user can copy. */
export type ActionRow = Record<string, unknown>;

/** Reads one action's row from the journal file on a connection of its own (as another process would). */
export function copyActionRow(journalPath: string, actionId: string): ActionRow {
  const reader = new Database(journalPath, { readonly: true, fileMustExist: true });
  try {
    const row = reader.prepare('SELECT * FROM actions WHERE action_id = ?').get(actionId) as ActionRow | undefined;
    if (row === undefined) throw new Error(`no actions row for ${actionId}`);
    return row;
  } finally {
    reader.close();
  }
}

/**
 * THREAT-MODEL: with no broker running, another process of the user writes an earlier copy of an action's row back
 * into the journal file, every column (copyActionRow's).
 */
export function writeActionRowBack(journalPath: string, row: ActionRow): void {
  const forger = new Database(journalPath, { fileMustExist: true, timeout: 5_000 });
  try {
    const columns = Object.keys(row).filter((column) => column !== 'action_id');
    forger
      .prepare(`UPDATE actions SET ${columns.map((c) => `${c} = @${c}`).join(', ')} WHERE action_id = @action_id`)
      .run(row);
  } finally {
    forger.close();
  }
}

/**
 * THREAT-MODEL: with no broker running, another process of the user makes an action's row say what `edit` returns: its
 * stored state and the columns recovery and the lists select by (stage, dispatch, outcome, recorded, resolved) alike.
 */
export function rewriteActionRow(
  journalPath: string,
  actionId: string,
  edit: (state: ActionState) => ActionState,
): void {
  const row = copyActionRow(journalPath, actionId);
  const state = edit(JSON.parse(String(row['state'])) as ActionState);
  writeActionRowBack(journalPath, {
    ...row,
    stage: state.stage,
    dispatch_seq: state.dispatch_seq,
    outcome: state.outcome,
    phase: state.phase,
    retry: state.retry,
    code: state.code,
    effect: state.effect,
    outcome_basis: state.outcome_basis,
    source: state.source,
    recorded: state.recorded ? 1 : 0,
    session_id: state.session_id,
    ticket: state.ticket,
    lane: state.lane,
    dispatch_evidence: state.dispatch_evidence,
    last_seq: state.last_seq,
    // As the journal derives them: resolved once its lane no longer waits on it, settled once an outcome is recorded.
    resolved_at_ms: ticketStanding(state) === 'resolved' ? state.updated_at_ms : null,
    settled_at_ms: state.recorded ? state.updated_at_ms : null,
    state: JSON.stringify(state),
  });
}

/**
 * A state made to read as if the remote's complete answer had been recorded (committed, succeeded): what another
 * process of the user writes over a recorded unknown's row to free the lane it heads (rewriteActionRow's `edit`).
 */
export function readsCommitted(state: ActionState): ActionState {
  return {
    ...state,
    outcome: 'committed',
    code: null,
    effect: 'succeeded',
    retry: 'never',
    outcome_basis: 'complete_response',
    source: 'remote_response',
  };
}

/**
 * A state made to read as a restart before its dispatch would have closed it (not_attempted, never sent): what another
 * process of the user writes over a dispatched action's row to have it sent again (rewriteActionRow's `edit`).
 */
export function closedNeverSent(state: ActionState): ActionState {
  return {
    ...state,
    stage: 'credential_authorized',
    dispatch_evidence: 'never_started',
    dispatch_seq: null,
    attempts: [],
    outcome: 'not_attempted',
    phase: 'connection_setup',
    code: 'BROKER_RESTARTED',
    effect: 'no_effect',
    retry: 'backoff',
    outcome_basis: 'broker_restart_before_dispatch',
    source: 'local_gate',
    recorded: true,
    result_id: null,
    result_digest: null,
  };
}
