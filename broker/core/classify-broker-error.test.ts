import { describe, expect, it } from 'vitest';
import type { ActionState, JournalEvent, NewEvent } from '../contract/index.js';
import { classifyBrokerError } from './classify-broker-error.js';
import { applyEvent, project } from './project.js';

const fp = `sha256:${'d'.repeat(64)}`;
const id = 'act_brokererr0001';

function stateAfter(events: NewEvent[]): ActionState {
  const withSeq = events.map(
    (e, i) => ({ session_id: null, ticket: 1, lane: null, ...e, seq: i + 1, at_ms: i }) as JournalEvent,
  );
  const state = project(withSeq).get(id);
  if (state === undefined) throw new Error('fixture');
  return state;
}
const accepted: NewEvent = {
  kind: 'ACTION_ACCEPTED',
  action_id: id,
  payload: {
    channel: 'http',
    target: 'route:docs POST /x',
    request_fingerprint: fp,
    approval: 'none',
    idempotent: false,
  },
};
const validated: NewEvent = { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} };
const authorized: NewEvent = {
  kind: 'CREDENTIAL_AUTHORIZED',
  action_id: id,
  payload: { credential_id: 'k', version_tag: 'v1', injection_mode: 'bearer', request_fingerprint: fp },
};
const dispatched: NewEvent = { kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } };

describe('classifyBrokerError', () => {
  it('when the broker threw after DISPATCH_STARTED with nothing classified: unknown, INTERNAL, reconcile — and the projection accepts it, so a person can abandon it', () => {
    const state = stateAfter([accepted, validated, authorized, dispatched]);
    const c = classifyBrokerError(state);
    expect(c).toMatchObject({
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
      code: 'INTERNAL',
      outcome_basis: 'broker_error_after_dispatch',
    });
    const recorded = applyEvent(state, {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: c,
      session_id: null,
      ticket: 1,
      lane: null,
      seq: 5,
      at_ms: 5,
    } as JournalEvent);
    expect(recorded).toMatchObject({ outcome: 'unknown', recorded: true });
    expect(
      applyEvent(recorded, {
        kind: 'ABANDONED',
        action_id: id,
        payload: { actor: { kind: 'person', id: 'p' }, reason: 'checked' },
        session_id: null,
        ticket: 1,
        lane: null,
        seq: 6,
        at_ms: 6,
      } as JournalEvent).abandoned,
    ).toBe(true);
  });

  it.each([
    ['only accepted', [accepted], 'validation'],
    ['authorized', [accepted, validated, authorized], 'credential_injection'],
  ] as const)(
    'when the broker threw before dispatch with the action %s: not_attempted in the last proven phase, never',
    (_w, events, phase) => {
      expect(classifyBrokerError(stateAfter([...events]))).toMatchObject({
        phase,
        outcome: 'not_attempted',
        retry: 'never',
        code: 'INTERNAL',
        outcome_basis: 'broker_error_before_dispatch',
      });
    },
  );

  it('when the record already says what is known (closed, or classified since dispatch), it adds nothing', () => {
    const cancelled: NewEvent = {
      kind: 'CANCELLED',
      action_id: id,
      payload: { actor: { kind: 'person', id: 'p' }, reason: 'no' },
      classification: {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        retry: 'never',
        code: 'APPROVAL_DENIED',
        effect: 'no_effect',
        outcome_basis: 'operator_cancelled_before_dispatch',
        source: 'local_gate',
      },
    };
    expect(classifyBrokerError(stateAfter([accepted, validated, cancelled]))).toBeUndefined();
    const recorded: NewEvent = {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: { attempt: 1 },
      classification: {
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'reconcile',
        code: 'REMOTE_OUTCOME_UNKNOWN',
        effect: 'unknown_effect',
        outcome_basis: 'response_not_observed_after_dispatch',
        source: 'transport_observed',
      },
    };
    expect(classifyBrokerError(stateAfter([accepted, validated, authorized, dispatched, recorded]))).toBeUndefined();
  });
});
