import { describe, expect, it } from 'vitest';
import type { Classification, JournalEvent, NewEvent } from '../contract/index.js';
import { chronologyOf } from './chronology.js';

// Realistic paths for one action (core tests build their own: broker/testing is an I/O folder).
const fingerprint = `sha256:${'f1'.padStart(64, '0')}`;
const person = { kind: 'person', id: 'operator-1' } as const;
const settled: Classification = {
  phase: 'remote_execution',
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
};
const unknown: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'REMOTE_OUTCOME_UNKNOWN',
  effect: 'unknown_effect',
  outcome_basis: 'response_not_observed_after_dispatch',
  source: 'transport_observed',
};
const notAttempted: Classification = {
  phase: 'connection_setup',
  outcome: 'not_attempted',
  retry: 'after_correction',
  code: 'TLS_FAILED',
  effect: 'no_effect',
  outcome_basis: 'tls_certificate_rejected',
  source: 'local_gate',
};
const e = (kind: string, id: string, payload: object, classification?: Classification): NewEvent =>
  ({ kind, action_id: id, payload, ...(classification === undefined ? {} : { classification }) }) as NewEvent;
const accepted = (id: string, approval = 'none') =>
  e('ACTION_ACCEPTED', id, {
    channel: 'http',
    target: 'route:docs POST /documents/{id}',
    request_fingerprint: fingerprint,
    approval,
    idempotent: false,
  });
const authorized = (id: string) =>
  e('CREDENTIAL_AUTHORIZED', id, {
    credential_id: 'cred_docs',
    version_tag: 'v3',
    injection_mode: 'bearer',
    request_fingerprint: fingerprint,
  });
const actionPaths = {
  httpApproved: (id: string) => [
    accepted(id, 'per_call'),
    e('PREFLIGHT_VALIDATED', id, {}),
    e('CARD_SHOWN', id, { expires_at_ms: 1 }),
    e('APPROVED', id, { actor: person, request_fingerprint: fingerprint }),
    authorized(id),
    e('DISPATCH_STARTED', id, { attempt: 1, connection: 'fresh' }),
    e('REQUEST_SENT', id, { attempt: 1, request_complete: true }),
    e('REMOTE_RESPONSE_STARTED', id, { attempt: 1, status: 200 }),
    e('REMOTE_RESPONSE_COMPLETE', id, { attempt: 1 }),
    e('RESULT_COMMITTED', id, { attempt: 1, result_id: 'res_1', result_digest: fingerprint }, settled),
    e('RESULT_DELIVERED', id, {}),
  ],
  httpNoApproval: (id: string) => [
    accepted(id),
    e('PREFLIGHT_VALIDATED', id, {}),
    authorized(id),
    e('DISPATCH_STARTED', id, { attempt: 1, connection: 'fresh' }),
    e('REQUEST_SENT', id, { attempt: 1, request_complete: true }),
    e('REMOTE_RESPONSE_STARTED', id, { attempt: 1, status: 200 }),
    e('OUTPUT_RECEIVED', id, { attempt: 1, stream: 'body', bytes: 512 }),
    e('REMOTE_RESPONSE_COMPLETE', id, { attempt: 1 }),
    e('RESULT_COMMITTED', id, { attempt: 1, result_id: 'res_1', result_digest: fingerprint }, settled),
    e('RESULT_DELIVERED', id, {}),
  ],
  rejectedByPerson: (id: string) => [
    accepted(id, 'per_call'),
    e('PREFLIGHT_VALIDATED', id, {}),
    e('CARD_SHOWN', id, { expires_at_ms: 1 }),
    e(
      'REJECTED',
      id,
      { actor: person, reason: 'no' },
      {
        ...notAttempted,
        phase: 'credential_injection',
        code: 'APPROVAL_DENIED',
        retry: 'never',
        outcome_basis: 'rejected_by_person',
      },
    ),
  ],
  setupFailedGaveUp: (id: string) => [
    accepted(id),
    e('PREFLIGHT_VALIDATED', id, {}),
    authorized(id),
    e('SETUP_ATTEMPT_FAILED', id, { attempt: 1, stage: 'tls_handshake' }),
    e('OUTCOME_RECORDED', id, { attempt: 1 }, notAttempted),
  ],
  lostThenReconciled: (id: string) => [
    accepted(id),
    e('PREFLIGHT_VALIDATED', id, {}),
    authorized(id),
    e('DISPATCH_STARTED', id, { attempt: 1, connection: 'reused' }),
    e('REQUEST_SENT', id, { attempt: 1, request_complete: true }),
    e('CONNECTION_LOST', id, { attempt: 1 }),
    e('OUTCOME_RECORDED', id, { attempt: 1 }, unknown),
    e(
      'RECONCILIATION_RESULT',
      id,
      { correlation: 'operation_id', lookup_action_id: 'act_lookup_0001' },
      { ...settled, outcome_basis: 'remote_operation_lookup', source: 'remote_query' },
    ),
  ],
};
type ActionPathName = keyof typeof actionPaths;

function stamped(events: NewEvent[], session = 'ses_agent_1'): JournalEvent[] {
  return events.map(
    (e, i) =>
      ({ ...e, seq: 10 + i, at_ms: 5_000 + i, session_id: session, ticket: 1, lane: e.lane ?? null }) as JournalEvent,
  );
}

const id = 'act_chrono_0001';
function of(path: ActionPathName, cut?: number) {
  return chronologyOf(id, stamped(actionPaths[path](id).slice(0, cut)));
}

describe('the five questions of an investigation (article 003)', () => {
  it.each<[string, ReturnType<typeof chronologyOf>, Record<string, unknown>]>([
    [
      'an approved, delivered request: who approved, crossed, observed, receipt, nothing to reconcile',
      of('httpApproved'),
      {
        authorization: {
          session_id: 'ses_agent_1',
          accepted_seq: 10,
          approval: 'per_call',
          decision: { seq: 13, kind: 'APPROVED', actor: { kind: 'person', id: 'operator-1' } },
          credential: { seq: 14, credential_id: 'cred_docs' },
        },
        dispatch: { crossed: true, attempts: [{ seq: 15, attempt: 1, connection: 'fresh' }], setup_failures: [] },
        receipt: { seq: 18, kind: 'REMOTE_RESPONSE_COMPLETE' },
        reconciliation: { needed: false },
      },
    ],
    [
      'a rejection: the decision names the person; nothing crossed',
      of('rejectedByPerson'),
      {
        authorization: { decision: { kind: 'REJECTED', actor: { kind: 'person' } } },
        dispatch: { crossed: false },
        transport: [],
        receipt: null,
        reconciliation: { needed: false },
      },
    ],
    [
      'a setup failure that gave up: never crossed, the failure is cited',
      of('setupFailedGaveUp'),
      {
        dispatch: { crossed: false, attempts: [], setup_failures: [{ seq: 13, attempt: 1, stage: 'tls_handshake' }] },
        reconciliation: { needed: false },
      },
    ],
    [
      'a lost connection, still unknown: reconciliation is needed and says what identifies the operation',
      of('lostThenReconciled', 7),
      {
        dispatch: { crossed: true, attempts: [{ seq: 13, connection: 'reused' }] },
        receipt: null,
        reconciliation: {
          needed: true,
          request_fingerprint: expect.stringMatching(/^sha256:/),
          target: expect.any(String),
          idempotent: false,
          lookups: [],
        },
      },
    ],
    [
      'the same, reconciled later: the lookup is the receipt, appended as a new fact',
      of('lostThenReconciled'),
      {
        receipt: { seq: 17, kind: 'RECONCILIATION_RESULT' },
        reconciliation: {
          needed: false,
          lookups: [{ seq: 17, correlation: 'operation_id', lookup_action_id: 'act_lookup_0001' }],
        },
      },
    ],
    [
      'dispatched, then the broker stopped: crossed, nothing observed after the boundary',
      of('httpApproved', 6),
      { dispatch: { crossed: true }, transport: [], receipt: null, reconciliation: { needed: true } },
    ],
  ])('%s', (_when, chronology, expected) => {
    expect(chronology).toMatchObject(expected);
  });

  it('lists the transport observations after dispatch, in append order, with original positions', () => {
    expect(of('httpNoApproval').transport.map((e) => [e.seq, e.kind])).toEqual([
      [14, 'REQUEST_SENT'],
      [15, 'REMOTE_RESPONSE_STARTED'],
      [16, 'OUTPUT_RECEIVED'],
      [17, 'REMOTE_RESPONSE_COMPLETE'],
    ]);
  });

  it("skips other actions' events and answers nothing for an unknown action", () => {
    const mixed = [...stamped(actionPaths.httpNoApproval('act_other_0001')).map((e) => ({ ...e, seq: e.seq + 100 }))];
    expect(chronologyOf(id, mixed)).toMatchObject({
      events: [],
      authorization: { accepted_seq: null },
      dispatch: { crossed: false },
    });
  });
});
