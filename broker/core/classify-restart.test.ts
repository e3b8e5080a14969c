import { describe, expect, it } from 'vitest';
import type { ActionState, JournalEvent, NewEvent } from '../contract/index.js';
import { classifyRestart } from './classify-restart.js';
import { project } from './project.js';

const fp = `sha256:${'c'.repeat(64)}`;
const id = 'act_restart000001';

function stateAfter(events: NewEvent[], idempotent = false): ActionState {
  const withSeq = events.map((e, i) => {
    const payload = e.kind === 'ACTION_ACCEPTED' ? { ...e.payload, idempotent } : e.payload;
    return { session_id: null, ticket: 1, lane: null, ...e, payload, seq: i + 1, at_ms: i } as JournalEvent;
  });
  const state = project(withSeq).get(id);
  if (state === undefined) throw new Error('fixture');
  return state;
}
const accepted: NewEvent = {
  kind: 'ACTION_ACCEPTED',
  action_id: id,
  payload: { channel: 'ssh', target: 'web1', request_fingerprint: fp, approval: 'none', idempotent: false },
};
const validated: NewEvent = { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} };
const authorized: NewEvent = {
  kind: 'CREDENTIAL_AUTHORIZED',
  action_id: id,
  payload: { credential_id: 'k', version_tag: 'v1', injection_mode: 'ssh_key', request_fingerprint: fp },
};
const setupFailed: NewEvent = {
  kind: 'SETUP_ATTEMPT_FAILED',
  action_id: id,
  payload: { attempt: 1, stage: 'user_auth' },
};
const dispatched = (attempt: number): NewEvent => ({
  kind: 'DISPATCH_STARTED',
  action_id: id,
  payload: { attempt, connection: 'fresh' },
});

describe('classifyRestart', () => {
  it.each([
    ['only accepted', [accepted], 'validation'],
    ['validated and authorized', [accepted, validated, authorized], 'credential_injection'],
    ['a setup attempt failed', [accepted, validated, authorized, setupFailed], 'connection_setup'],
  ] as const)(
    'when the broker stopped with the action %s, it is not_attempted in the last proven phase',
    (_w, events, phase) => {
      expect(classifyRestart(stateAfter([...events]))).toMatchObject({
        phase,
        outcome: 'not_attempted',
        effect: 'no_effect',
        code: 'BROKER_RESTARTED',
        outcome_basis: 'broker_restart_before_dispatch',
      });
    },
  );

  it('when DISPATCH_STARTED was durable and nothing settled it, it is unknown — reconcile unless idempotent', () => {
    const events = [accepted, validated, authorized, dispatched(1)];
    expect(classifyRestart(stateAfter(events))).toMatchObject({
      outcome: 'unknown',
      retry: 'reconcile',
      outcome_basis: 'broker_restart_after_dispatch',
    });
    expect(classifyRestart(stateAfter(events, true))).toMatchObject({ outcome: 'unknown', retry: 'backoff' });
  });

  it('when the record already says what is known, it adds nothing', () => {
    const recorded: NewEvent = {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: {
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'reconcile',
        code: 'REMOTE_RESULT_INCOMPLETE',
        effect: 'unknown_effect',
        outcome_basis: 'no_exit_status_or_remote_process_identity',
        source: 'transport_observed',
      },
    };
    expect(classifyRestart(stateAfter([accepted, validated, authorized, dispatched(1), recorded]))).toBeUndefined();
  });
});
