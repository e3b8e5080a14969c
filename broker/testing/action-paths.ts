import type { ApprovalMode, Classification, NewEvent } from '../contract/index.js';

/**
 * Realistic event scripts for one action each, as the dispatcher and channels would append them:
 * approvals, rejections, expiry, cancellation, setup failures, SSH and HTTP results, caller events,
 * reconciliation and operator settlement. Tests cut them short to leave actions in flight.
 */
export type ActionPathName = keyof typeof actionPaths;

export function sha256Of(n: number): string {
  return `sha256:${n.toString(16).padStart(64, '0')}`;
}

const fingerprint = sha256Of(0xf1);
const person = { kind: 'person', id: 'operator-1' } as const;

function accepted(
  id: string,
  opts: {
    channel?: 'http' | 'ssh';
    approval?: ApprovalMode;
    idempotent?: boolean;
    lane?: string;
    retryBudget?: number;
  } = {},
): NewEvent {
  return {
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    session_id: 'ses_test',
    lane: opts.lane ?? 'lane-a',
    payload: {
      channel: opts.channel ?? 'http',
      target: opts.channel === 'ssh' ? 'host:build-1 cmd:sha256:ab' : 'route:docs POST /documents/{id}',
      request_fingerprint: fingerprint,
      approval: opts.approval ?? 'none',
      idempotent: opts.idempotent ?? false,
      ...(opts.retryBudget === undefined ? {} : { retry_budget: opts.retryBudget }),
    },
  };
}

const ev = {
  validated: (id: string): NewEvent => ({ kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} }),
  card: (id: string): NewEvent => ({
    kind: 'CARD_SHOWN',
    action_id: id,
    payload: { expires_at_ms: 1_900_000_000_000 },
  }),
  approved: (id: string): NewEvent => ({
    kind: 'APPROVED',
    action_id: id,
    payload: { actor: person, request_fingerprint: fingerprint },
  }),
  authorized: (id: string): NewEvent => ({
    kind: 'CREDENTIAL_AUTHORIZED',
    action_id: id,
    payload: {
      credential_id: 'cred_docs',
      version_tag: 'v3',
      injection_mode: 'bearer',
      request_fingerprint: fingerprint,
    },
  }),
  dispatch: (id: string, attempt = 1, connection: 'fresh' | 'reused' = 'fresh', generation?: number): NewEvent => ({
    kind: 'DISPATCH_STARTED',
    action_id: id,
    payload: {
      attempt,
      connection,
      connection_id: `conn-${attempt}`,
      ...(generation === undefined ? {} : { generation }),
    },
  }),
  /** A retry lease far in the future (these scripts are folded under any test clock). */
  leased: (
    id: string,
    generation: number,
    decision: 'RETRY_NEW_ATTEMPT' | 'RETRY_SAME_KEY' | 'RETRY_WHEN_ALLOWED' = 'RETRY_NEW_ATTEMPT',
  ): NewEvent => ({
    kind: 'RETRY_LEASED',
    action_id: id,
    payload: {
      generation,
      holder: `worker-${generation}`,
      expires_at_ms: 4_000_000_000_000,
      decision,
      requested_by: { kind: 'broker', id: 'retry-engine' },
    },
  }),
  sent: (id: string, attempt = 1): NewEvent => ({
    kind: 'REQUEST_SENT',
    action_id: id,
    payload: { attempt, request_complete: true },
  }),
  responseStarted: (id: string, status: number, attempt = 1): NewEvent => ({
    kind: 'REMOTE_RESPONSE_STARTED',
    action_id: id,
    payload: { attempt, status },
  }),
  responseComplete: (id: string, attempt = 1): NewEvent => ({
    kind: 'REMOTE_RESPONSE_COMPLETE',
    action_id: id,
    payload: { attempt, digest: sha256Of(0xd1) },
  }),
  committed: (id: string, c: Classification, attempt = 1): NewEvent => ({
    kind: 'RESULT_COMMITTED',
    action_id: id,
    payload: { attempt, result_id: `res_${id}`, result_digest: sha256Of(0xd1) },
    classification: c,
  }),
  delivered: (id: string): NewEvent => ({ kind: 'RESULT_DELIVERED', action_id: id, payload: {} }),
  recorded: (id: string, c: Classification, attempt?: number): NewEvent => ({
    kind: 'OUTCOME_RECORDED',
    action_id: id,
    payload: attempt === undefined ? {} : { attempt },
    classification: c,
  }),
};

/** The observations an SSH command that exits and closes its channel records, in order (stdout, then stderr counts). */
export const sshExitObservations = [
  'REQUEST_SENT',
  'REMOTE_RESPONSE_STARTED',
  'EXIT_STATUS',
  'OUTPUT_RECEIVED',
  'OUTPUT_RECEIVED',
  'CHANNEL_CLOSED',
] as const;

/** A committed, succeeded classification (a complete response). */
export const succeeded: Classification = {
  phase: 'remote_execution',
  outcome: 'committed',
  retry: 'never',
  code: null,
  effect: 'succeeded',
  outcome_basis: 'complete_response',
  source: 'remote_response',
};

/** A lookup (`lookupActionId`) that found the action's operation done at the remote: it settles committed, succeeded. */
export function reconciledByLookup(id: string, lookupActionId: string): NewEvent {
  return {
    kind: 'RECONCILIATION_RESULT',
    action_id: id,
    payload: { correlation: 'operation_id', lookup_action_id: lookupActionId },
    classification: { ...succeeded, outcome_basis: 'remote_operation_lookup', source: 'remote_query' },
  };
}

function unknownAfterDispatch(code: Classification['code'], basis: string): Classification {
  return {
    phase: 'remote_execution',
    outcome: 'unknown',
    retry: 'reconcile',
    code,
    effect: 'unknown_effect',
    outcome_basis: basis,
    source: 'transport_observed',
  };
}

function notAttempted(
  phase: Classification['phase'],
  code: Classification['code'],
  retry: Classification['retry'],
  basis: string,
): Classification {
  return {
    phase,
    outcome: 'not_attempted',
    retry,
    code,
    effect: 'no_effect',
    outcome_basis: basis,
    source: 'local_gate',
  };
}

/** Every script, each a function of the action id. */
/**
 * An MCP tool call admitted and authorized as the executor appends it (ACTION_ACCEPTED, PREFLIGHT_VALIDATED,
 * CREDENTIAL_AUTHORIZED): the next step the journal accepts is its DISPATCH_STARTED.
 */
export function mcpAuthorized(
  id: string,
  opts: { lane: string; target: string; fingerprint: string; injectionMode: 'mcp_env' | 'none' },
): NewEvent[] {
  return [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      session_id: 'ses_test',
      lane: opts.lane,
      payload: {
        channel: 'mcp',
        target: opts.target,
        request_fingerprint: opts.fingerprint,
        approval: 'none',
        idempotent: false,
      },
    },
    { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
    {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: {
        credential_id: 'none',
        version_tag: 'none',
        injection_mode: opts.injectionMode,
        request_fingerprint: opts.fingerprint,
      },
    },
  ];
}

export const actionPaths = {
  httpNoApproval: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 200),
    { kind: 'OUTPUT_RECEIVED', action_id: id, payload: { attempt: 1, stream: 'body', bytes: 512 } },
    ev.responseComplete(id),
    ev.committed(id, succeeded),
    ev.delivered(id),
  ],
  /** The crash test's path: every durable transition of DESIGN.md §2, in order. */
  httpApproved: (id: string): NewEvent[] => [
    accepted(id, { approval: 'per_call' }),
    ev.validated(id),
    ev.card(id),
    ev.approved(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 200),
    ev.responseComplete(id),
    ev.committed(id, succeeded),
    ev.delivered(id),
  ],
  http500: (id: string): NewEvent[] => [
    accepted(id, { approval: 'session' }),
    ev.validated(id),
    {
      kind: 'APPROVED',
      action_id: id,
      payload: { actor: { kind: 'policy', id: 'session-approval' }, request_fingerprint: fingerprint },
    },
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 500),
    ev.responseComplete(id),
    ev.committed(id, {
      ...succeeded,
      code: 'REMOTE_ERROR_STATUS',
      effect: 'failed',
      outcome_basis: 'complete_error_response',
    }),
    ev.delivered(id),
  ],
  rejectedByPerson: (id: string): NewEvent[] => [
    accepted(id, { approval: 'per_call' }),
    ev.validated(id),
    ev.card(id),
    {
      kind: 'REJECTED',
      action_id: id,
      payload: { actor: person, reason: 'not this week' },
      classification: notAttempted('credential_injection', 'APPROVAL_DENIED', 'never', 'approval_denied'),
    },
  ],
  expired: (id: string): NewEvent[] => [
    accepted(id, { approval: 'per_call' }),
    ev.validated(id),
    ev.card(id),
    {
      kind: 'EXPIRED',
      action_id: id,
      payload: {},
      classification: notAttempted('credential_injection', 'APPROVAL_EXPIRED', 'never', 'approval_window_closed'),
    },
  ],
  cancelledWhileWaiting: (id: string): NewEvent[] => [
    accepted(id, { approval: 'per_call' }),
    ev.validated(id),
    ev.card(id),
    ev.approved(id),
    {
      kind: 'CANCELLED',
      action_id: id,
      payload: { actor: person, reason: 'superseded' },
      // As the queue's cancel() words a person's cancel (gateClassification('operator_cancelled')).
      classification: notAttempted(
        'credential_injection',
        'APPROVAL_DENIED',
        'never',
        'cancelled_by_operator_before_dispatch',
      ),
    },
  ],
  callerCancelledBeforeDispatch: (id: string): NewEvent[] => [
    accepted(id, { approval: 'per_call' }),
    ev.validated(id),
    ev.card(id),
    { kind: 'CALLER_CANCELLED', action_id: id, payload: { stage: 'card_shown' } },
    {
      kind: 'CANCELLED',
      action_id: id,
      payload: { actor: { kind: 'agent', id: 'agent-1' }, reason: 'caller cancelled' },
      classification: notAttempted(
        'credential_injection',
        'CALLER_CANCELLED',
        'never',
        'cancellation_observed_before_dispatch',
      ),
    },
  ],
  preflightFailed: (id: string): NewEvent[] => [
    accepted(id),
    {
      kind: 'PREFLIGHT_FAILED',
      action_id: id,
      payload: { field: 'headers.authorization' },
      classification: notAttempted('validation', 'FORBIDDEN_HEADER', 'after_correction', 'forbidden_header'),
    },
  ],
  setupFailedThenSent: (id: string): NewEvent[] => [
    accepted(id, { idempotent: true, retryBudget: 1 }),
    ev.validated(id),
    ev.authorized(id),
    { kind: 'SETUP_ATTEMPT_FAILED', action_id: id, payload: { attempt: 1, stage: 'tcp_connect' } },
    ev.recorded(id, notAttempted('connection_setup', 'CONNECT_REFUSED', 'backoff', 'connect_refused'), 1),
    ev.leased(id, 1),
    ev.dispatch(id, 2, 'fresh', 1),
    ev.sent(id, 2),
    ev.responseStarted(id, 201, 2),
    ev.responseComplete(id, 2),
    ev.committed(id, succeeded, 2),
    ev.delivered(id),
  ],
  setupFailedGaveUp: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    {
      kind: 'SETUP_ATTEMPT_FAILED',
      action_id: id,
      payload: { attempt: 1, stage: 'tls_handshake', detail: 'certificate expired' },
    },
    ev.recorded(id, notAttempted('connection_setup', 'TLS_FAILED', 'after_correction', 'tls_certificate_rejected'), 1),
  ],
  lostThenReconciled: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id, 1, 'reused'),
    ev.sent(id),
    { kind: 'CONNECTION_LOST', action_id: id, payload: { attempt: 1 } },
    ev.recorded(id, unknownAfterDispatch('REMOTE_OUTCOME_UNKNOWN', 'response_not_observed_after_dispatch'), 1),
    reconciledByLookup(id, 'act_lookup_0001'),
  ],
  throttledThenRetried: (id: string): NewEvent[] => [
    accepted(id, { idempotent: true, lane: 'lane-b', retryBudget: 2 }),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 429),
    ev.responseComplete(id),
    ev.recorded(
      id,
      {
        phase: 'remote_execution',
        outcome: 'rejected',
        retry: 'backoff',
        code: 'REMOTE_THROTTLED',
        effect: 'rejected',
        outcome_basis: 'throttled_retry_after',
        source: 'remote_response',
        retry_after_ms: 1_000,
      },
      1,
    ),
    ev.leased(id, 1, 'RETRY_WHEN_ALLOWED'),
    ev.dispatch(id, 2, 'reused', 1),
    ev.sent(id, 2),
    ev.responseStarted(id, 200, 2),
    ev.responseComplete(id, 2),
    ev.committed(id, succeeded, 2),
    ev.delivered(id),
  ],
  remoteAuthRejected: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 401),
    ev.responseComplete(id),
    ev.committed(id, {
      phase: 'remote_execution',
      outcome: 'rejected',
      retry: 'never',
      code: 'REMOTE_AUTH_REJECTED',
      effect: 'rejected',
      outcome_basis: 'http_401',
      source: 'remote_response',
    }),
    ev.delivered(id),
  ],
  deliveryFailed: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 200),
    ev.responseComplete(id),
    ev.committed(id, succeeded),
    { kind: 'CALLER_DISCONNECTED', action_id: id, payload: { stage: 'result_delivery' } },
    ev.recorded(id, {
      ...succeeded,
      phase: 'result_delivery',
      retry: 'fetch_result',
      code: 'RESULT_DELIVERY_FAILED',
      outcome_basis: 'caller_disconnected_before_ack',
      source: 'transport_observed',
    }),
  ],
  sshExit23: (id: string): NewEvent[] => [
    accepted(id, { channel: 'ssh', lane: 'lane-ssh' }),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    ev.responseStarted(id, 0),
    { kind: 'OUTPUT_RECEIVED', action_id: id, payload: { attempt: 1, stream: 'stdout', bytes: 100 } },
    { kind: 'OUTPUT_RECEIVED', action_id: id, payload: { attempt: 1, stream: 'stderr', bytes: 20 } },
    { kind: 'EXIT_STATUS', action_id: id, payload: { attempt: 1, exit_status: 23 } },
    { kind: 'CHANNEL_CLOSED', action_id: id, payload: { attempt: 1 } },
    ev.responseComplete(id),
    ev.committed(id, { ...succeeded, code: 'COMMAND_FAILED', effect: 'failed', outcome_basis: 'exit_status' }),
    ev.delivered(id),
  ],
  sshClosedNoExitAttested: (id: string): NewEvent[] => [
    accepted(id, { channel: 'ssh', lane: 'lane-ssh' }),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    { kind: 'EXIT_SIGNAL', action_id: id, payload: { attempt: 1, signal: 'SIGTERM' } },
    { kind: 'CHANNEL_CLOSED', action_id: id, payload: { attempt: 1 } },
    ev.recorded(id, unknownAfterDispatch('REMOTE_RESULT_INCOMPLETE', 'no_exit_status_or_remote_process_identity'), 1),
    {
      kind: 'OPERATOR_ATTESTED',
      action_id: id,
      payload: { actor: person, basis: 'checked the host: the job ran' },
      classification: { ...succeeded, outcome_basis: 'operator_attested', source: 'operator_attested' },
    },
  ],
  callerCancelledAfterDispatch: (id: string): NewEvent[] => [
    accepted(id),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    { kind: 'CALLER_CANCELLED', action_id: id, payload: { stage: 'request_sent' } },
    ev.recorded(id, unknownAfterDispatch('CALLER_CANCELLED', 'cancellation_after_dispatch'), 1),
  ],
  deadlineInFlight: (id: string): NewEvent[] => [
    accepted(id, { idempotent: true }),
    ev.validated(id),
    ev.authorized(id),
    ev.dispatch(id),
    ev.sent(id),
    { kind: 'CALLER_DEADLINE_EXCEEDED', action_id: id, payload: { stage: 'request_sent' } },
  ],
} satisfies Record<string, (id: string) => NewEvent[]>;

export const actionPathNames = Object.keys(actionPaths) as ActionPathName[];

/**
 * Events the projection refuses at every point of the scripts above: an approval of a fingerprint
 * that was never bound, an event for an action that was never accepted, an attempt out of order.
 */
export function impossibleEvents(id: string): NewEvent[] {
  return [
    { kind: 'APPROVED', action_id: id, payload: { actor: person, request_fingerprint: sha256Of(0xbad) } },
    { kind: 'RESULT_DELIVERED', action_id: `${id}_ghost`, payload: {} },
    ev.dispatch(id, 9),
  ];
}
