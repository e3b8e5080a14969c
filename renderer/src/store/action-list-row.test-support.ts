import type { ActionListRow } from '../../../broker/contract/index.js';

/** The base wall time of the renderer's action-list fixtures. */
export const t0 = 1_767_225_600_000;

/**
 * A settled, approved HTTP action for renderer tests: accepted at t0 + seq s, decided 1 s later,
 * dispatched 2 s later, settled 3 s later. Override what the case is about.
 */
export function rowOf(seq: number, overrides: Partial<ActionListRow> = {}): ActionListRow {
  const at = t0 + seq * 1_000;
  return {
    action_id: `act_row${String(seq).padStart(6, '0')}`,
    ticket: seq,
    accepted_at_ms: at,
    session_id: 'ses_1',
    agent: { name: 'claude', pid: 4242 },
    channel: 'http',
    target: 'docs',
    method: 'POST',
    request: `/docs/${seq}`,
    lane: 'doc-7',
    stage: 'result_delivered',
    decision: 'approved',
    decided_by: 'person:alice (web, operator session)',
    outcome: 'committed',
    code: null,
    effect: 'succeeded',
    decided_at_ms: at + 1_000,
    dispatched_at_ms: at + 2_000,
    settled_at_ms: at + 3_000,
    duration_ms: 3_000,
    first_seq: seq,
    last_seq: seq,
    ...overrides,
  };
}
