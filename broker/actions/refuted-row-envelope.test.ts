import { describe, expect, it } from 'vitest';
import type { ActionState } from '../contract/index.js';
import { refutedRowState } from '../journal/recovery.js';
import { stateEnvelope } from './state-envelope.js';

/** A settled action's row as another process rewrote it: committed, never dispatched (what it says is beside the point). */
const rewritten = {
  action_id: 'act_refuted_0001',
  session_id: 'ses_test',
  ticket: 3,
  lane: 'route:docs',
  channel: 'http',
  target: 'route:docs POST /releases',
  request_fingerprint: `sha256:${'0'.repeat(64)}`,
  approval: 'none',
  idempotent: false,
  stage: 'result_delivered',
  decision: null,
  dispatch_evidence: 'never_started',
  dispatch_seq: null,
  attempts: [],
  outcome: 'not_attempted',
  phase: 'connection_setup',
  retry: 'backoff',
  code: 'CONNECT_REFUSED',
  effect: 'no_effect',
  outcome_basis: 'connect_refused',
  source: 'transport_observed',
  retry_after_ms: null,
  caller_disposition: null,
  recorded: true,
  result_id: null,
  result_digest: null,
  abandoned: false,
  retry_budget: 0,
  approval_rule: null,
  retry_generation: 0,
  lease: null,
  key_expires_at_ms: null,
  first_seq: 1,
  last_seq: 9,
  accepted_at_ms: 0,
  updated_at_ms: 0,
} satisfies ActionState;

describe('what an agent is told of an action whose row the log refutes while its events are sealed (docs/audit.md)', () => {
  it('dispatched and settled by the log: an error saying unknown, with retry reconcile, never what the row said', () => {
    const state = refutedRowState(rewritten, {
      first_dispatch: 4,
      last_dispatch: 4,
      last_classified: 8,
      last_seq: 9,
      abandoned: false,
      outcome: 'committed',
      session_id: 'ses_test',
      ticket: 3,
      lane: 'route:docs',
      consistent: true,
    });
    const envelope = stateEnvelope(state);
    expect(envelope.error).toMatchObject({ outcome: 'unknown', retry: 'reconcile', code: 'REMOTE_OUTCOME_UNKNOWN' });
    expect(JSON.stringify(envelope)).not.toContain('not_attempted');
    expect(state).toMatchObject({ dispatch_seq: 4, dispatch_evidence: 'started_locally', stage: 'result_delivered' });
  });

  it('in flight by the log: dispatched, no outcome recorded yet', () => {
    const state = refutedRowState(rewritten, {
      first_dispatch: 4,
      last_dispatch: 4,
      last_classified: null,
      last_seq: 6,
      abandoned: false,
      outcome: 'unknown',
      session_id: 'ses_test',
      ticket: 3,
      lane: 'route:docs',
      consistent: true,
    });
    expect(state).toMatchObject({ outcome: 'unknown', recorded: false, stage: 'dispatch_started', last_seq: 6 });
    expect(JSON.stringify(stateEnvelope(state))).not.toContain('not_attempted');
  });
});
