import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  actionStateSchema,
  type ActionState,
  type Classification,
  type JournalEvent,
  type NewEvent,
} from '../contract/index.js';
import { applyEvent, project } from './project.js';
import { attestClassification } from './attest-outcome.js';
import { classifyOutcome } from './classify-outcome.js';
import { classifyRestart } from './classify-restart.js';

const fp = `sha256:${'f'.repeat(64)}`;
const person = { kind: 'person' as const, id: 'operator' };

/** Builds a journal for one or more actions with increasing seq, as the journal would. */
function journal() {
  const events: JournalEvent[] = [];
  let seq = 0;
  const add = (e: NewEvent): JournalEvent => {
    seq += 1;
    const full = { session_id: 'ses_1', ticket: 1, lane: 'lane-a', ...e, seq, at_ms: 1_000 + seq } as JournalEvent;
    events.push(full);
    return full;
  };
  return { events, add };
}

const c = (over: Partial<Classification>): Classification => ({
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'REMOTE_OUTCOME_UNKNOWN',
  effect: 'unknown_effect',
  outcome_basis: 'test',
  source: 'transport_observed',
  ...over,
});
const committed = c({
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
});

function toAuthorized(
  add: (e: NewEvent) => JournalEvent,
  id = 'act_000000001',
  approval: 'none' | 'per_call' = 'per_call',
) {
  add({
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    payload: {
      channel: 'http',
      target: 'payments POST /v1/charges',
      request_fingerprint: fp,
      approval,
      idempotent: false,
    },
  });
  add({ kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} });
  if (approval !== 'none') {
    add({ kind: 'CARD_SHOWN', action_id: id, payload: { expires_at_ms: 9_999 } });
    add({ kind: 'APPROVED', action_id: id, payload: { actor: person, request_fingerprint: fp } });
  }
  add({
    kind: 'CREDENTIAL_AUTHORIZED',
    action_id: id,
    payload: { credential_id: 'cred_1', version_tag: 'v1', injection_mode: 'bearer', request_fingerprint: fp },
  });
}

describe('project', () => {
  it('when an action runs to a delivered result, folds every stage in append order', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({
      kind: 'DISPATCH_STARTED',
      action_id: 'act_000000001',
      payload: { attempt: 1, connection: 'fresh', connection_id: 'conn-1' },
    });
    add({ kind: 'REQUEST_SENT', action_id: 'act_000000001', payload: { attempt: 1, request_complete: true } });
    add({ kind: 'REMOTE_RESPONSE_STARTED', action_id: 'act_000000001', payload: { attempt: 1, status: 201 } });
    add({ kind: 'REMOTE_RESPONSE_COMPLETE', action_id: 'act_000000001', payload: { attempt: 1 } });
    add({
      kind: 'RESULT_COMMITTED',
      action_id: 'act_000000001',
      payload: { attempt: 1, result_id: 'res_1', result_digest: fp },
      classification: committed,
    });
    add({ kind: 'RESULT_DELIVERED', action_id: 'act_000000001', payload: {} });
    const state = project(events).get('act_000000001');
    expect(state).toMatchObject({
      stage: 'result_delivered',
      decision: 'approved',
      dispatch_evidence: 'remote_receipt',
      dispatch_seq: 6,
      outcome: 'committed',
      effect: 'succeeded',
      caller_disposition: 'completed',
      recorded: true,
      result_id: 'res_1',
      last_seq: 11,
    });
    expect(actionStateSchema.parse(state)).toEqual(state);
    expect(state?.attempts).toEqual([
      expect.objectContaining({
        n: 1,
        state: 'dispatched',
        request_complete: true,
        response_complete: true,
        response_status: 201,
        dispatch_seq: 6,
      }),
    ]);
  });

  it('when DISPATCH_STARTED is durable, the action is unknown until a result is recorded', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'reused' } });
    expect(project(events).get('act_000000001')).toMatchObject({
      outcome: 'unknown',
      effect: 'unknown_effect',
      recorded: false,
      dispatch_evidence: 'started_locally',
    });
  });

  describe('when evidence would contradict the record, it throws IMPOSSIBLE_TRANSITION', () => {
    const cases: [string, (add: (e: NewEvent) => JournalEvent) => void][] = [
      [
        'not_attempted after DISPATCH_STARTED',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({
            kind: 'OUTCOME_RECORDED',
            action_id: 'act_000000001',
            payload: {},
            classification: c({ outcome: 'not_attempted', phase: 'connection_setup', effect: 'no_effect' }),
          });
        },
      ],
      [
        'committed → unknown',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({
            kind: 'RESULT_COMMITTED',
            action_id: 'act_000000001',
            payload: { attempt: 1, result_id: 'r', result_digest: fp },
            classification: committed,
          });
          add({ kind: 'OUTCOME_RECORDED', action_id: 'act_000000001', payload: {}, classification: c({}) });
        },
      ],
      [
        'committed → rejected by a reconciliation',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({
            kind: 'RESULT_COMMITTED',
            action_id: 'act_000000001',
            payload: { attempt: 1, result_id: 'r', result_digest: fp },
            classification: committed,
          });
          add({
            kind: 'RECONCILIATION_RESULT',
            action_id: 'act_000000001',
            payload: { correlation: 'operation_id', lookup_action_id: 'act_000000002' },
            classification: c({ outcome: 'rejected', effect: 'rejected', source: 'remote_query' }),
          });
        },
      ],
      [
        'a second terminal decision (rejected, then expired)',
        (add) => {
          add({
            kind: 'ACTION_ACCEPTED',
            action_id: 'act_000000001',
            payload: { channel: 'http', target: 't', request_fingerprint: fp, approval: 'per_call', idempotent: false },
          });
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
          const gate = classifyOutcome({
            channel: 'http',
            dispatchStarted: false,
            handedToTransport: false,
            requestComplete: false,
            idempotent: false,
            gate: { kind: 'approval_denied' },
          });
          add({
            kind: 'REJECTED',
            action_id: 'act_000000001',
            payload: { actor: person, reason: 'no' },
            classification: gate,
          });
          add({ kind: 'EXPIRED', action_id: 'act_000000001', payload: {}, classification: gate });
        },
      ],
      [
        'an approval after an expiry',
        (add) => {
          add({
            kind: 'ACTION_ACCEPTED',
            action_id: 'act_000000001',
            payload: { channel: 'http', target: 't', request_fingerprint: fp, approval: 'per_call', idempotent: false },
          });
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
          add({
            kind: 'EXPIRED',
            action_id: 'act_000000001',
            payload: {},
            classification: c({
              outcome: 'not_attempted',
              phase: 'credential_injection',
              effect: 'no_effect',
              code: 'APPROVAL_EXPIRED',
            }),
          });
          add({ kind: 'APPROVED', action_id: 'act_000000001', payload: { actor: person, request_fingerprint: fp } });
        },
      ],
      [
        'dispatching a cancelled, approved ticket',
        (add) => {
          toAuthorized(add);
          add({
            kind: 'CANCELLED',
            action_id: 'act_000000001',
            payload: { actor: person, reason: 'changed my mind' },
            classification: c({
              outcome: 'not_attempted',
              phase: 'credential_injection',
              effect: 'no_effect',
              code: 'CALLER_CANCELLED',
            }),
          });
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
        },
      ],
      [
        'dispatching before the credential is authorized',
        (add) => {
          add({
            kind: 'ACTION_ACCEPTED',
            action_id: 'act_000000001',
            payload: { channel: 'http', target: 't', request_fingerprint: fp, approval: 'none', idempotent: false },
          });
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
        },
      ],
      [
        'authorizing a credential without the required approval',
        (add) => {
          add({
            kind: 'ACTION_ACCEPTED',
            action_id: 'act_000000001',
            payload: { channel: 'http', target: 't', request_fingerprint: fp, approval: 'per_call', idempotent: false },
          });
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
          add({
            kind: 'CREDENTIAL_AUTHORIZED',
            action_id: 'act_000000001',
            payload: { credential_id: 'c', version_tag: 'v', injection_mode: 'bearer', request_fingerprint: fp },
          });
        },
      ],
      [
        'an approval naming another fingerprint',
        (add) => {
          add({
            kind: 'ACTION_ACCEPTED',
            action_id: 'act_000000001',
            payload: { channel: 'http', target: 't', request_fingerprint: fp, approval: 'per_call', idempotent: false },
          });
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
          add({
            kind: 'APPROVED',
            action_id: 'act_000000001',
            payload: { actor: person, request_fingerprint: `sha256:${'0'.repeat(64)}` },
          });
        },
      ],
      [
        'a second attempt while the first has no recorded outcome',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 2, connection: 'fresh' } });
        },
      ],
      [
        'an exit status for an attempt that never dispatched',
        (add) => {
          toAuthorized(add);
          add({
            kind: 'SETUP_ATTEMPT_FAILED',
            action_id: 'act_000000001',
            payload: { attempt: 1, stage: 'tcp_connect' },
          });
          add({ kind: 'EXIT_STATUS', action_id: 'act_000000001', payload: { attempt: 1, exit_status: 0 } });
        },
      ],
      [
        'a tracked operation before its submission result is committed',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({
            kind: 'OPERATION_SUBMITTED',
            action_id: 'act_000000001',
            payload: { attempt: 1, result_id: 'res_1', job_id: 'job-1' },
          });
        },
      ],
      [
        'a first event that is not ACTION_ACCEPTED',
        (add) => {
          add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
        },
      ],
      [
        'a settling event without a classification',
        (add) => {
          toAuthorized(add);
          add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
          add({ kind: 'OUTCOME_RECORDED', action_id: 'act_000000001', payload: {} });
        },
      ],
    ];
    it.each(cases)('%s', (_name, build) => {
      const { events, add } = journal();
      build(add);
      expect(() => project(events)).toThrow(expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION' }));
    });
  });

  it('when events arrive out of append order, it refuses to fold them', () => {
    const { events, add } = journal();
    toAuthorized(add, 'act_000000001');
    toAuthorized(add, 'act_000000002');
    const [a, b] = [events[0], events.find((e) => e.action_id === 'act_000000002')];
    if (a === undefined || b === undefined) throw new Error('fixture');
    expect(() => project([b, a])).toThrow(/append order/);
  });

  it('when a late reconciliation finds the result, unknown becomes committed and the caller disposition stays timed_out', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
    add({ kind: 'REQUEST_SENT', action_id: 'act_000000001', payload: { attempt: 1, request_complete: true } });
    add({ kind: 'CALLER_DEADLINE_EXCEEDED', action_id: 'act_000000001', payload: { stage: 'awaiting_response' } });
    add({
      kind: 'OUTCOME_RECORDED',
      action_id: 'act_000000001',
      payload: { attempt: 1 },
      classification: c({
        code: 'CALLER_DEADLINE_EXCEEDED',
        outcome_basis: 'deadline_after_transport_write_no_remote_receipt',
      }),
    });
    add({
      kind: 'RECONCILIATION_RESULT',
      action_id: 'act_000000001',
      payload: { correlation: 'idempotency_token', lookup_action_id: 'act_000000002' },
      classification: c({
        outcome: 'committed',
        effect: 'succeeded',
        code: null,
        outcome_basis: 'remote_operation_lookup',
        source: 'remote_query',
      }),
    });
    expect(project(events).get('act_000000001')).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      source: 'remote_query',
      outcome_basis: 'remote_operation_lookup',
      caller_disposition: 'timed_out',
    });
  });

  it('when delivery fails after the result is committed, the outcome stays committed with retry fetch_result', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
    add({
      kind: 'RESULT_COMMITTED',
      action_id: 'act_000000001',
      payload: { attempt: 1, result_id: 'r', result_digest: fp },
      classification: committed,
    });
    add({ kind: 'CALLER_DISCONNECTED', action_id: 'act_000000001', payload: { stage: 'delivering' } });
    add({
      kind: 'OUTCOME_RECORDED',
      action_id: 'act_000000001',
      payload: {},
      classification: { ...committed, phase: 'result_delivery', retry: 'fetch_result', code: 'RESULT_DELIVERY_FAILED' },
    });
    expect(project(events).get('act_000000001')).toMatchObject({
      outcome: 'committed',
      phase: 'result_delivery',
      retry: 'fetch_result',
      caller_disposition: 'disconnected',
    });
  });

  it('when connection setup fails and a backoff attempt succeeds, both attempts are kept', () => {
    const { events, add } = journal();
    toAuthorized(add, 'act_000000001', 'none');
    add({
      kind: 'SETUP_ATTEMPT_FAILED',
      action_id: 'act_000000001',
      payload: { attempt: 1, stage: 'tcp_connect', detail: 'ECONNREFUSED' },
    });
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 2, connection: 'fresh' } });
    const state = project(events).get('act_000000001');
    expect(state?.attempts.map((a) => [a.n, a.state, a.setup_stage])).toEqual([
      [1, 'setup_failed', 'tcp_connect'],
      [2, 'dispatched', null],
    ]);
  });

  it('when a caller cancels before dispatch, the action closes as not_attempted / no_effect', () => {
    const { events, add } = journal();
    add({
      kind: 'ACTION_ACCEPTED',
      action_id: 'act_000000001',
      payload: {
        channel: 'ssh',
        target: 'web1: uptime',
        request_fingerprint: fp,
        approval: 'per_call',
        idempotent: false,
      },
    });
    add({ kind: 'PREFLIGHT_VALIDATED', action_id: 'act_000000001', payload: {} });
    add({ kind: 'CARD_SHOWN', action_id: 'act_000000001', payload: { expires_at_ms: 5_000 } });
    add({ kind: 'CALLER_CANCELLED', action_id: 'act_000000001', payload: { stage: 'awaiting_authorization' } });
    const gate = classifyOutcome({
      channel: 'ssh',
      dispatchStarted: false,
      handedToTransport: false,
      requestComplete: false,
      idempotent: false,
      caller: 'cancelled',
    });
    add({
      kind: 'CANCELLED',
      action_id: 'act_000000001',
      payload: { actor: { kind: 'agent', id: 'ses_1' }, reason: 'caller cancelled' },
      classification: gate,
    });
    expect(project(events).get('act_000000001')).toMatchObject({
      decision: 'cancelled',
      outcome: 'not_attempted',
      effect: 'no_effect',
      outcome_basis: 'cancellation_observed_before_dispatch',
      caller_disposition: 'canceled',
      dispatch_seq: null,
    });
  });

  it('for any sequence of events it accepts, nothing after DISPATCH_STARTED reads not_attempted', () => {
    const kinds = [
      'DISPATCH_STARTED',
      'REQUEST_SENT',
      'SETUP_ATTEMPT_FAILED',
      'OUTCOME_RECORDED',
      'RESULT_COMMITTED',
      'CALLER_CANCELLED',
      'CANCELLED',
      'RECONCILIATION_RESULT',
    ] as const;
    const outcomes = ['not_attempted', 'unknown', 'committed', 'rejected'] as const;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...kinds), fc.constantFrom(...outcomes)), { maxLength: 12 }),
        (steps) => {
          const fixture = journal();
          toAuthorized(fixture.add);
          let state = project(fixture.events).get('act_000000001');
          let seq = fixture.events.length;
          let attempt = 0;
          for (const [kind, outcome] of steps) {
            seq += 1;
            const classification = c({ outcome, effect: outcome === 'not_attempted' ? 'no_effect' : 'unknown_effect' });
            const payloads: Record<(typeof kinds)[number], unknown> = {
              DISPATCH_STARTED: { attempt: attempt + 1, connection: 'fresh' },
              SETUP_ATTEMPT_FAILED: { attempt: attempt + 1, stage: 'tcp_connect' },
              REQUEST_SENT: { attempt, request_complete: true },
              OUTCOME_RECORDED: {},
              RESULT_COMMITTED: { attempt, result_id: `r${seq}`, result_digest: fp },
              CALLER_CANCELLED: { stage: 'x' },
              CANCELLED: { actor: person, reason: 'r' },
              RECONCILIATION_RESULT: { correlation: 'operation_id', lookup_action_id: 'act_000000009' },
            };
            const event = {
              kind,
              action_id: 'act_000000001',
              session_id: null,
              ticket: 1,
              lane: null,
              seq,
              at_ms: seq,
              payload: payloads[kind],
              classification,
            } as JournalEvent;
            try {
              state = applyEvent(state, event);
              if (kind === 'DISPATCH_STARTED' || kind === 'SETUP_ATTEMPT_FAILED') attempt += 1;
            } catch (error) {
              expect(error).toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
            }
            if (state?.dispatch_seq !== null) expect(state?.outcome).not.toBe('not_attempted');
          }
        },
      ),
      { numRuns: 1500 },
    );
  });
});

describe('ABANDONED: a person releases the lane behind an unknown head', () => {
  it('is allowed once, only on a dispatched action whose recorded outcome is unknown, and keeps the outcome', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
    const abandon = (): NewEvent => ({
      kind: 'ABANDONED',
      action_id: 'act_000000001',
      payload: { actor: person, reason: 'checked by hand' },
    });
    // Not yet recorded: the attempt is still in flight.
    expect(() =>
      project([
        ...events,
        { ...abandon(), seq: 99, at_ms: 99, session_id: null, ticket: 1, lane: 'lane-a' } as JournalEvent,
      ]),
    ).toThrow(/abandoned/);
    add({ kind: 'OUTCOME_RECORDED', action_id: 'act_000000001', payload: { attempt: 1 }, classification: c({}) });
    add(abandon());
    const state = project(events).get('act_000000001');
    expect(state).toMatchObject({ abandoned: true, outcome: 'unknown', effect: 'unknown_effect' });
    add(abandon());
    expect(() => project(events)).toThrow(/already abandoned/);
  });

  it('refuses a head that was never dispatched or is settled', () => {
    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'ABANDONED', action_id: 'act_000000001', payload: { actor: person, reason: 'x' } });
    expect(() => project(events)).toThrow(/IMPOSSIBLE|abandoned/);
  });

  it('a session event never folds into an action, and project() skips session subjects', () => {
    const { events, add } = journal();
    toAuthorized(add);
    const session = {
      kind: 'SESSION_APPROVED',
      action_id: 'ses_000001',
      session_id: 'ses_000001',
      ticket: null,
      lane: null,
      seq: 50,
      at_ms: 50,
      payload: { actor: person },
    } as JournalEvent;
    expect(project([...events, session]).size).toBe(1);
    expect(() => applyEvent(project(events).get('act_000000001'), { ...session, action_id: 'act_000000001' })).toThrow(
      /session event/,
    );
  });
});

describe('when a journal written before ATTESTED_REJECTED holds a rejection a person attested', () => {
  // What attestClassification returned before 101f91b: the same classification, coded as a refusal the remote returned.
  const oldAttestedRejection: Classification = {
    ...attestClassification('rejected', 'no_effect'),
    code: 'REMOTE_REJECTED',
  };
  const attest = (classification: Classification): NewEvent => ({
    kind: 'OPERATOR_ATTESTED',
    action_id: 'act_000000001',
    payload: { actor: person, basis: 'the remote team says it never ran' },
    classification,
  });

  /** An unknown a person settles: dispatched and recorded unknown, or recorded unknown by a quarantined recovery. */
  function unknownThen(settle: NewEvent, dispatched: boolean): ActionState | undefined {
    const { events, add } = journal();
    toAuthorized(add);
    if (dispatched) {
      add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
      add({ kind: 'OUTCOME_RECORDED', action_id: 'act_000000001', payload: { attempt: 1 }, classification: c({}) });
    } else {
      const before = project(events).get('act_000000001');
      const recovered = before === undefined ? undefined : classifyRestart(before, undefined, 'quarantined');
      if (recovered === undefined) throw new Error('fixture: recovery classified nothing');
      add({ kind: 'OUTCOME_RECORDED', action_id: 'act_000000001', payload: {}, classification: recovered });
    }
    add(settle);
    return project(events).get('act_000000001');
  }

  it.each([
    ['dispatched', true],
    ['recorded unknown before dispatch by a quarantined recovery', false],
  ])('its REMOTE_REJECTED folds as ATTESTED_REJECTED, the state a new attestation folds to (%s)', (_, dispatched) => {
    const old = unknownThen(attest(oldAttestedRejection), dispatched);
    expect(old).toMatchObject({ outcome: 'rejected', code: 'ATTESTED_REJECTED', source: 'operator_attested' });
    expect(old).toEqual(unknownThen(attest(attestClassification('rejected', 'no_effect')), dispatched));
  });

  it("a remote's refusal and a lookup's authoritative no-record keep REMOTE_REJECTED", () => {
    const lookup = unknownThen(
      {
        kind: 'RECONCILIATION_RESULT',
        action_id: 'act_000000001',
        payload: { correlation: 'idempotency_token', lookup_action_id: 'act_000000002' },
        classification: c({
          outcome: 'rejected',
          retry: 'never',
          code: 'REMOTE_REJECTED',
          effect: 'no_effect',
          outcome_basis: 'remote_query_no_record',
          source: 'remote_query',
        }),
      },
      true,
    );
    expect(lookup).toMatchObject({ code: 'REMOTE_REJECTED', source: 'remote_query' });

    const { events, add } = journal();
    toAuthorized(add);
    add({ kind: 'DISPATCH_STARTED', action_id: 'act_000000001', payload: { attempt: 1, connection: 'fresh' } });
    add({
      kind: 'RESULT_COMMITTED',
      action_id: 'act_000000001',
      payload: { attempt: 1, result_id: 'res_1', result_digest: fp },
      classification: c({
        outcome: 'rejected',
        retry: 'after_correction',
        code: 'REMOTE_REJECTED',
        effect: 'rejected',
        outcome_basis: 'complete_refusal',
        source: 'remote_response',
      }),
    });
    expect(project(events).get('act_000000001')).toMatchObject({ code: 'REMOTE_REJECTED', source: 'remote_response' });
  });
});
