import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { attestClassification } from '../core/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { attestedRejection, oldAttestedRejection, remoteRefusal } from '../testing/attested-rejection.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { validateNewEvent } from './validate-new-event.js';

const good = { kind: 'PREFLIGHT_VALIDATED', action_id: 'act_valid_0001', payload: {} };

describe('when an event does not match the contract', () => {
  it.each([
    ['an unknown kind', { ...good, kind: 'LAUNCHED' }, 'kind'],
    ['a malformed action id', { ...good, action_id: 'nope' }, 'action_id'],
    ['a negative ticket', { ...good, ticket: -1 }, 'ticket'],
    [
      'a payload field of the wrong type',
      { kind: 'REQUEST_SENT', action_id: 'act_valid_0001', payload: { attempt: 1, request_complete: 'yes' } },
      'payload.request_complete',
    ],
    [
      'a fingerprint that is not a sha256 digest',
      {
        kind: 'APPROVED',
        action_id: 'act_valid_0001',
        payload: { actor: { kind: 'person', id: 'p' }, request_fingerprint: 'Bearer abc' },
      },
      'payload.request_fingerprint',
    ],
    [
      'a classification with an unknown outcome',
      {
        ...good,
        classification: {
          phase: 'validation',
          outcome: 'failed',
          retry: 'never',
          code: null,
          effect: 'no_effect',
          outcome_basis: 'x',
          source: 'local_gate',
        },
      },
      'classification.outcome',
    ],
  ])('refuses %s with INVALID_ARGUMENT naming the field, not the value', (_name, input, field) => {
    expect(() => validateNewEvent(input)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field }));
    expect(() => validateNewEvent(input)).not.toThrow(/Bearer abc/);
  });
});

describe('when an event carries fields the contract does not name', () => {
  it('refuses an unnamed payload field, so nothing (such as a secret) rides along into the journal', () => {
    const input = {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: 'act_valid_0001',
      payload: {
        credential_id: 'cred_1',
        version_tag: 'v1',
        injection_mode: 'bearer',
        request_fingerprint: `sha256:${'a'.repeat(64)}`,
        token: 'hunter2',
      },
    };
    expect(() => validateNewEvent(input)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'payload' }),
    );
    expect(() => validateNewEvent(input)).not.toThrow(/hunter2/);
  });

  it('drops an unnamed top-level field instead of storing it', () => {
    const parsed = validateNewEvent({ ...good, secret: 'hunter2' });
    expect(JSON.stringify(parsed)).not.toContain('hunter2');
    expect(parsed).toEqual(good);
  });
});

describe('when a CANCELLED names who cancelled twice (actor and code) and the two disagree', () => {
  const cancelled = (actor: string, code: string, basis: string): unknown => ({
    kind: 'CANCELLED',
    action_id: 'act_valid_0001',
    payload: { actor: { kind: actor, id: 'x' }, reason: 'r' },
    classification: {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      retry: 'never',
      code,
      effect: 'no_effect',
      outcome_basis: basis,
      source: 'local_gate',
    },
  });

  it('accepts the pairs the queue writes: the agent with its caller code, a person or the broker without one', () => {
    expect(() =>
      validateNewEvent(cancelled('agent', 'CALLER_CANCELLED', 'cancellation_observed_before_dispatch')),
    ).not.toThrow();
    expect(() =>
      validateNewEvent(cancelled('person', 'APPROVAL_DENIED', 'cancelled_by_operator_before_dispatch')),
    ).not.toThrow();
    expect(() =>
      validateNewEvent(cancelled('broker', 'SESSION_REVOKED', 'session_revoked_before_dispatch')),
    ).not.toThrow();
    expect(() => validateNewEvent(cancelled('broker', 'SESSION_ENDED', 'session_ended_before_dispatch'))).not.toThrow();
  });

  it.each([
    ['a person with a caller code', cancelled('person', 'CALLER_CANCELLED', 'cancellation_observed_before_dispatch')],
    ['the agent with a person’s code', cancelled('agent', 'APPROVAL_DENIED', 'cancelled_by_operator_before_dispatch')],
    ['a person with the process-gone code', cancelled('person', 'SESSION_ENDED', 'session_ended_before_dispatch')],
    ['the agent with the process-gone code', cancelled('agent', 'SESSION_ENDED', 'session_ended_before_dispatch')],
  ])('refuses %s: metrics would count it on the wrong side (cancelled / withdrawn)', (_name, input) => {
    expect(() => validateNewEvent(input)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'classification.code' }),
    );
  });
});

describe('when a new event would record a rejection a person attested as REMOTE_REJECTED (a refusal the remote returned)', () => {
  const id = 'act_valid_0001';
  it.each([
    ['an attestation coded as before 101f91b', attestedRejection(id, oldAttestedRejection)],
    ['an attestation coded REMOTE_REJECTED under another source', attestedRejection(id, remoteRefusal)],
    [
      'any classification of source operator_attested coded REMOTE_REJECTED',
      { kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: 1 }, classification: oldAttestedRejection },
    ],
  ])('refuses %s with INVALID_ARGUMENT naming classification.code', (_name, input) => {
    expect(() => validateNewEvent(input)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        field: 'classification.code',
        message: expect.stringContaining('ATTESTED_REJECTED'),
      }),
    );
  });

  it("accepts ATTESTED_REJECTED, and the remote's own REMOTE_REJECTED on its response or a lookup", () => {
    expect(
      validateNewEvent(attestedRejection(id, attestClassification('rejected', 'no_effect'))).classification?.code,
    ).toBe('ATTESTED_REJECTED');
    const committed: NewEvent = {
      kind: 'RESULT_COMMITTED',
      action_id: id,
      payload: { attempt: 1, result_id: 'res_1', result_digest: `sha256:${'a'.repeat(64)}` },
      classification: remoteRefusal,
    };
    expect(() => validateNewEvent(committed)).not.toThrow();
    const lookup: NewEvent = {
      kind: 'RECONCILIATION_RESULT',
      action_id: id,
      payload: { correlation: 'idempotency_token', lookup_action_id: 'act_lookup_0001' },
      classification: {
        ...remoteRefusal,
        retry: 'never',
        effect: 'no_effect',
        outcome_basis: 'remote_query_no_record',
        source: 'remote_query',
      },
    };
    expect(() => validateNewEvent(lookup)).not.toThrow();
  });

  describe('appended to a journal', () => {
    let t: TempJournal;
    beforeEach(async () => {
      t = await openTempJournal();
    });
    afterEach(async () => {
      await t.dispose();
    });

    it('is refused before it is queued: nothing is written and the action stays unknown, open to a true attestation', async () => {
      // Dispatched, the connection lost, recorded unknown: what a person settles.
      await t.journal.appendBatch(actionPaths.lostThenReconciled(id).filter((e) => e.kind !== 'RECONCILIATION_RESULT'));
      const before = t.journal.stats().events;
      await expect(t.journal.append(attestedRejection(id, oldAttestedRejection))).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        field: 'classification.code',
      });
      expect(t.journal.stats().events).toBe(before);
      expect(t.journal.getAction(id)).toMatchObject({ outcome: 'unknown' });
      await t.journal.append(attestedRejection(id, attestClassification('rejected', 'no_effect')));
      expect(t.journal.getAction(id)).toMatchObject({ outcome: 'rejected', code: 'ATTESTED_REJECTED' });
    });
  });
});
