import { describe, expect, it } from 'vitest';
import type { ActionState, JournalEvent, NewEvent } from '../contract/index.js';
import { attestClassification } from './attest-outcome.js';
import { classifyRestart } from './classify-restart.js';
import { ticketStanding } from './lane-schedule.js';
import { applyEvent, project, retriableRecord } from './project.js';

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

describe('classifyRestart in a journal the start found quarantined (its integrity anchor disagrees)', () => {
  it.each([
    ['only accepted', [accepted], 'validation'],
    ['validated and authorized', [accepted, validated, authorized], 'credential_injection'],
    ['a setup attempt failed', [accepted, validated, authorized, setupFailed], 'connection_setup'],
  ] as const)(
    'when the broker stopped with the action %s, it is unknown — the log may have lost its DISPATCH_STARTED',
    (_w, events, phase) => {
      expect(classifyRestart(stateAfter([...events]), undefined, 'quarantined')).toEqual({
        phase,
        outcome: 'unknown',
        retry: 'reconcile',
        code: 'BROKER_RESTARTED',
        effect: 'unknown_effect',
        outcome_basis: 'broker_restart_journal_quarantined',
        source: 'local_gate',
      });
    },
  );

  it('advises reconcile even where a dispatched unknown could be repeated: the journal leases it no retry', () => {
    const state = stateAfter([accepted, validated, authorized], true);
    expect(classifyRestart(state, undefined, 'quarantined')).toMatchObject({ outcome: 'unknown', retry: 'reconcile' });
    const keyed = { ...stateAfter([accepted, validated, authorized]), key_expires_at_ms: 50 };
    expect(classifyRestart(keyed, 49, 'quarantined')?.retry).toBe('reconcile');
    // The record it writes is one the retry lease refuses: the advice and the journal agree.
    const recorded = applyEvent(state, {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: {},
      classification: classifyRestart(state, undefined, 'quarantined'),
      session_id: null,
      ticket: 1,
      lane: null,
      seq: 4,
      at_ms: 4,
    } as JournalEvent);
    expect(recorded.outcome).toBe('unknown');
    expect(retriableRecord(recorded)).toBe(false);
  });

  it('a dispatched action reads as in any restart, and a recorded one is left alone', () => {
    const events = [accepted, validated, authorized, dispatched(1)];
    expect(classifyRestart(stateAfter(events), undefined, 'quarantined')).toEqual(classifyRestart(stateAfter(events)));
    const closed = applyEvent(stateAfter([accepted, validated, authorized]), {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: {},
      classification: classifyRestart(stateAfter([accepted, validated, authorized]), undefined, 'quarantined'),
      session_id: null,
      ticket: 1,
      lane: null,
      seq: 4,
      at_ms: 4,
    } as JournalEvent);
    expect(classifyRestart(closed, undefined, 'quarantined')).toBeUndefined();
  });

  it('the projection takes it: unknown with no dispatch recorded, and it blocks its lane until a person ends it', () => {
    const before = stateAfter([accepted, validated, authorized]);
    const at = (seq: number) => ({ session_id: null, ticket: 1, lane: null, seq, at_ms: seq });
    const after = applyEvent(before, {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: {},
      classification: classifyRestart(before, undefined, 'quarantined'),
      ...at(4),
    } as JournalEvent);
    expect(after).toMatchObject({ outcome: 'unknown', recorded: true, dispatch_seq: null });
    expect(after.dispatch_evidence).toBe('never_started');
    // DESIGN §4: the next ticket is never released as if the unknown one had failed.
    expect(ticketStanding(after)).toBe('blocked');
    const person = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
    const abandoned = applyEvent(after, {
      kind: 'ABANDONED',
      action_id: id,
      payload: { actor: person, reason: 'cannot tell' },
      ...at(5),
    } as JournalEvent);
    expect(ticketStanding(abandoned)).toBe('resolved');
    const attested = applyEvent(after, {
      kind: 'OPERATOR_ATTESTED',
      action_id: id,
      payload: { actor: person, basis: 'saw it' },
      classification: attestClassification('committed', 'succeeded'),
      ...at(5),
    } as JournalEvent);
    expect(ticketStanding(attested)).toBe('resolved');
  });
});
