import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { classifyOutcome } from './classify-outcome.js';
import type { OutcomeEvidence } from './outcome-evidence.js';

const base: OutcomeEvidence = {
  channel: 'http',
  dispatchStarted: false,
  handedToTransport: false,
  requestComplete: false,
  idempotent: false,
};
const dispatched = (over: Partial<OutcomeEvidence>): OutcomeEvidence => ({
  ...base,
  dispatchStarted: true,
  connection: 'fresh',
  handedToTransport: true,
  requestComplete: true,
  ...over,
});
const response = (status: number, over: Partial<NonNullable<OutcomeEvidence['http']>> = {}) => ({
  status,
  framingComplete: true,
  ...over,
});

type Row = [when: string, evidence: OutcomeEvidence, expected: Partial<ReturnType<typeof classifyOutcome>>];

const rows: Row[] = [
  // validation: refused before touching a secret or resolving a host
  [
    'an agent sets Authorization',
    { ...base, gate: { kind: 'validation', code: 'FORBIDDEN_HEADER', field: 'headers.authorization' } },
    {
      phase: 'validation',
      outcome: 'not_attempted',
      retry: 'after_correction',
      code: 'FORBIDDEN_HEADER',
      effect: 'no_effect',
      source: 'local_gate',
    },
  ],
  [
    'the approved fingerprint changed before the write',
    { ...base, gate: { kind: 'fingerprint_mismatch' } },
    { phase: 'validation', outcome: 'not_attempted', code: 'FINGERPRINT_MISMATCH', retry: 'after_correction' },
  ],
  [
    'an idempotency key is reused with another body',
    { ...base, gate: { kind: 'idempotency_mismatch' } },
    { phase: 'validation', outcome: 'not_attempted', code: 'IDEMPOTENCY_MISMATCH' },
  ],
  // credential_injection
  [
    'the vault is locked',
    { ...base, gate: { kind: 'vault_locked' } },
    { phase: 'credential_injection', outcome: 'not_attempted', code: 'VAULT_LOCKED', retry: 'backoff' },
  ],
  [
    'the secret is missing',
    { ...base, gate: { kind: 'credential_missing' } },
    { phase: 'credential_injection', code: 'CREDENTIAL_MISSING', retry: 'after_correction' },
  ],
  [
    'a person denies approval',
    { ...base, gate: { kind: 'approval_denied' } },
    {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      code: 'APPROVAL_DENIED',
      retry: 'never',
      effect: 'no_effect',
    },
  ],
  [
    'the approval expires',
    { ...base, gate: { kind: 'approval_expired' } },
    { phase: 'credential_injection', code: 'APPROVAL_EXPIRED', retry: 'never' },
  ],
  [
    'the session is revoked before dispatch',
    { ...base, gate: { kind: 'session_revoked' } },
    { code: 'SESSION_REVOKED', outcome: 'not_attempted', retry: 'never' },
  ],
  [
    'a person cancels the ticket before dispatch (approved or not)',
    { ...base, gate: { kind: 'operator_cancelled' } },
    {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      code: 'APPROVAL_DENIED',
      retry: 'never',
      effect: 'no_effect',
      outcome_basis: 'cancelled_by_operator_before_dispatch',
    },
  ],
  [
    'the SSH session recording cannot be started before exec',
    { ...base, gate: { kind: 'recording_unavailable' } },
    {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      code: 'RECORDING_UNAVAILABLE',
      retry: 'after_correction',
      effect: 'no_effect',
      outcome_basis: 'recording_unavailable_before_dispatch',
    },
  ],
  [
    'no OAuth2 access token: its token fetch could not reach the token endpoint',
    { ...base, gate: { kind: 'oauth_token_unavailable', transient: true } },
    {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      code: 'OAUTH_TOKEN_UNAVAILABLE',
      retry: 'backoff',
      effect: 'no_effect',
      outcome_basis: 'oauth_token_unavailable_before_dispatch',
    },
  ],
  [
    'no OAuth2 access token: the token endpoint refused the client',
    { ...base, gate: { kind: 'oauth_token_unavailable', transient: false } },
    {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      code: 'OAUTH_TOKEN_UNAVAILABLE',
      retry: 'after_correction',
      effect: 'no_effect',
      outcome_basis: 'oauth_token_unavailable_before_dispatch',
    },
  ],
  [
    'the caller cancels while awaiting approval',
    { ...base, caller: 'cancelled' },
    {
      outcome: 'not_attempted',
      effect: 'no_effect',
      outcome_basis: 'cancellation_observed_before_dispatch',
      code: 'CALLER_CANCELLED',
    },
  ],
  [
    'the caller disconnects before dispatch',
    { ...base, caller: 'disconnected' },
    { outcome: 'not_attempted', effect: 'no_effect', outcome_basis: 'caller_disconnected_before_dispatch' },
  ],
  // connection_setup on a fresh connection
  [
    'TCP is refused and setup attempts remain',
    { ...base, setup: { failure: 'connect_refused', stage: 'tcp_connect', attempts: 1, attemptsMax: 3 } },
    {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'backoff',
      code: 'CONNECT_REFUSED',
      effect: 'no_effect',
      source: 'transport_observed',
    },
  ],
  [
    'TCP is refused and setup attempts are exhausted',
    { ...base, setup: { failure: 'connect_refused', stage: 'tcp_connect', attempts: 3, attemptsMax: 3 } },
    { phase: 'connection_setup', outcome: 'not_attempted', retry: 'after_correction', code: 'CONNECT_REFUSED' },
  ],
  [
    "an MCP child's start is refused during its crash backoff: wait, do not correct",
    {
      ...base,
      channel: 'mcp',
      setup: { failure: 'mcp_spawn', stage: 'spawn', attempts: 1, attemptsMax: 1, retryAfterMs: 1234.5 },
    },
    { outcome: 'not_attempted', retry: 'backoff', code: 'MCP_SPAWN_FAILED', retry_after_ms: 1235 },
  ],
  [
    "an MCP child's program is missing (one attempt, no backoff known): correct it",
    { ...base, channel: 'mcp', setup: { failure: 'mcp_spawn', stage: 'spawn', attempts: 1, attemptsMax: 1 } },
    { outcome: 'not_attempted', retry: 'after_correction', code: 'MCP_SPAWN_FAILED' },
  ],
  [
    'the TLS certificate has expired',
    { ...base, setup: { failure: 'tls_certificate', stage: 'tls_handshake', attempts: 1, attemptsMax: 3 } },
    { phase: 'connection_setup', outcome: 'not_attempted', retry: 'after_correction', code: 'TLS_FAILED' },
  ],
  [
    'the network guard refuses the resolved address',
    { ...base, setup: { failure: 'address_forbidden', stage: 'dns', attempts: 1, attemptsMax: 3 } },
    {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      code: 'INVALID_TARGET',
      retry: 'after_correction',
      effect: 'no_effect',
    },
  ],
  [
    'the host name does not exist',
    { ...base, setup: { failure: 'dns_not_found', stage: 'dns', attempts: 1, attemptsMax: 3 } },
    { phase: 'connection_setup', code: 'DNS_FAILED', retry: 'after_correction' },
  ],
  [
    'DNS fails temporarily',
    { ...base, setup: { failure: 'dns_temporary', stage: 'dns', attempts: 1, attemptsMax: 3 } },
    { phase: 'connection_setup', code: 'DNS_FAILED', retry: 'backoff' },
  ],
  [
    'the SSH host key changed',
    {
      ...base,
      channel: 'ssh',
      setup: { failure: 'ssh_host_key', stage: 'host_key_verified', attempts: 1, attemptsMax: 3 },
    },
    { phase: 'connection_setup', outcome: 'not_attempted', code: 'SSH_HOST_KEY_REJECTED', retry: 'after_correction' },
  ],
  [
    'accept_new host-key memory fails its integrity check',
    {
      ...base,
      channel: 'ssh',
      setup: { failure: 'ssh_known_hosts', stage: 'host_key_verified', attempts: 1, attemptsMax: 1 },
    },
    {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      code: 'SSH_KNOWN_HOSTS_UNTRUSTED',
      retry: 'after_correction',
    },
  ],
  [
    'the SSH user key is rejected',
    { ...base, channel: 'ssh', setup: { failure: 'ssh_auth', stage: 'user_auth', attempts: 1, attemptsMax: 3 } },
    { phase: 'connection_setup', code: 'SSH_AUTH_FAILED', retry: 'after_correction' },
  ],
  // remote_execution: HTTP
  [
    'the write fails on a reused pooled connection',
    dispatched({ connection: 'reused', transportBroken: true }),
    {
      phase: 'remote_execution',
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      retry: 'reconcile',
      outcome_basis: 'reused_connection_broke_after_handoff',
    },
  ],
  [
    'the write fails on a reused connection for an idempotent PUT',
    dispatched({ connection: 'reused', transportBroken: true, idempotent: true }),
    { outcome: 'unknown', retry: 'backoff' },
  ],
  [
    'the connection closes with no response under a declared key contract',
    dispatched({ transportBroken: true, idempotencyContract: { withinRetention: true } }),
    { outcome: 'unknown', retry: 'same_idempotency_key', outcome_basis: 'response_not_observed_after_dispatch' },
  ],
  [
    'the contract retention window has passed',
    dispatched({ transportBroken: true, idempotencyContract: { withinRetention: false } }),
    { outcome: 'unknown', retry: 'reconcile' },
  ],
  [
    'a complete 200 arrives',
    dispatched({ http: response(200) }),
    {
      phase: 'remote_execution',
      outcome: 'committed',
      effect: 'succeeded',
      code: null,
      retry: 'never',
      source: 'remote_response',
    },
  ],
  [
    'a complete 202 arrives',
    dispatched({ http: response(202) }),
    { outcome: 'committed', effect: 'succeeded', outcome_basis: 'submission_accepted_track_job_separately' },
  ],
  [
    'a complete 500 answers a POST',
    dispatched({ http: response(500) }),
    { phase: 'remote_execution', outcome: 'committed', effect: 'failed', code: 'REMOTE_ERROR_STATUS', retry: 'never' },
  ],
  [
    'a complete 401 arrives',
    dispatched({ http: response(401) }),
    { outcome: 'rejected', effect: 'rejected', code: 'REMOTE_AUTH_REJECTED', retry: 'never' },
  ],
  [
    'a complete 422 arrives',
    dispatched({ http: response(422) }),
    { outcome: 'rejected', code: 'REMOTE_REJECTED', retry: 'after_correction' },
  ],
  [
    'a 429 answers an idempotent GET with Retry-After',
    dispatched({ idempotent: true, http: response(429, { retryAfterMs: 2000 }) }),
    { outcome: 'rejected', code: 'REMOTE_THROTTLED', retry: 'backoff', retry_after_ms: 2000 },
  ],
  [
    'a 429 answers a POST',
    dispatched({ http: response(429, { retryAfterMs: 2000 }) }),
    { outcome: 'rejected', code: 'REMOTE_THROTTLED', retry: 'never' },
  ],
  [
    'a 503 answers an idempotent GET',
    dispatched({ idempotent: true, http: response(503) }),
    { outcome: 'rejected', retry: 'backoff' },
  ],
  [
    'a 503 answers a POST',
    dispatched({ http: response(503) }),
    { outcome: 'committed', effect: 'failed', retry: 'never' },
  ],
  [
    'a 502 comes from a proxy',
    dispatched({ http: response(502) }),
    { outcome: 'unknown', outcome_basis: 'intermediary_response_not_origin_result' },
  ],
  [
    'a response carries Proxy-Status',
    dispatched({ http: response(500, { fromProxy: true }) }),
    { outcome: 'unknown', source: 'transport_observed' },
  ],
  // A retry out of unknown (an earlier attempt dispatched, no authoritative result): only its success settles.
  [
    'a retry out of unknown is answered 200',
    dispatched({ earlierAttemptUnknown: true, idempotent: true, http: response(200) }),
    { outcome: 'committed', effect: 'succeeded', outcome_basis: 'complete_response' },
  ],
  [
    'a retry out of unknown is answered 404',
    dispatched({ earlierAttemptUnknown: true, idempotent: true, http: response(404) }),
    {
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      retry: 'backoff',
      outcome_basis: 'retry_answer_does_not_settle_earlier_attempt',
      source: 'remote_response',
    },
  ],
  [
    'a same-key retry out of unknown is answered 409',
    dispatched({ earlierAttemptUnknown: true, idempotencyContract: { withinRetention: true }, http: response(409) }),
    {
      outcome: 'unknown',
      retry: 'same_idempotency_key',
      outcome_basis: 'retry_answer_does_not_settle_earlier_attempt',
    },
  ],
  [
    'a retry out of unknown is answered 500',
    dispatched({ earlierAttemptUnknown: true, idempotent: true, http: response(500) }),
    { outcome: 'unknown', outcome_basis: 'retry_answer_does_not_settle_earlier_attempt' },
  ],
  [
    'a 408 arrives',
    dispatched({ http: response(408) }),
    { outcome: 'unknown', outcome_basis: 'request_timeout_status_not_proof_of_no_effect' },
  ],
  [
    'the body stops mid-way',
    dispatched({ transportBroken: true, http: response(200, { framingComplete: false }) }),
    { outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE', outcome_basis: 'response_framing_incomplete' },
  ],
  [
    'only 100 Continue was seen',
    dispatched({ http: { informationalOnly: true, framingComplete: false } }),
    { outcome: 'unknown', outcome_basis: 'informational_response_only' },
  ],
  ...[300, 301, 302, 307, 308].map((status): Row => [
    `a ${status} within the origin (not followed)`,
    dispatched({ http: response(status) }),
    {
      outcome: 'committed',
      effect: 'failed',
      code: 'REDIRECT_NOT_FOLLOWED',
      retry: 'after_correction',
      outcome_basis: 'redirect_not_followed_same_origin',
    },
  ]),
  ...[303, 304].map((status): Row => [
    `a ${status} within the origin answers the request`,
    dispatched({ http: response(status) }),
    { outcome: 'committed', effect: 'succeeded', code: null, retry: 'never', outcome_basis: 'complete_response' },
  ]),
  [
    'a redirect is not allowed',
    dispatched({ http: response(307, { redirectBlocked: true }) }),
    { outcome: 'committed', code: 'REDIRECT_BLOCKED', retry: 'after_correction' },
  ],
  [
    'the deadline passes after the transport write',
    dispatched({ caller: 'deadline' }),
    {
      phase: 'remote_execution',
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'CALLER_DEADLINE_EXCEEDED',
      outcome_basis: 'deadline_after_transport_write_no_remote_receipt',
    },
  ],
  [
    'the deadline passes after DISPATCH_STARTED but before any byte was handed over',
    dispatched({ caller: 'deadline', handedToTransport: false, requestComplete: false }),
    { outcome: 'unknown', outcome_basis: 'deadline_after_dispatch_started' },
  ],
  [
    'the caller cancels after the write',
    dispatched({ caller: 'cancelled' }),
    {
      outcome: 'unknown',
      code: 'CALLER_CANCELLED',
      outcome_basis: 'cancellation_after_transport_write_no_remote_receipt',
    },
  ],
  [
    'the caller cancels but the complete response already arrived',
    dispatched({ caller: 'cancelled', http: response(201) }),
    { outcome: 'committed', effect: 'succeeded' },
  ],
  [
    'the result is recorded but delivery fails',
    dispatched({ http: response(200), deliveryFailed: true }),
    {
      phase: 'result_delivery',
      outcome: 'committed',
      retry: 'fetch_result',
      code: 'RESULT_DELIVERY_FAILED',
      effect: 'succeeded',
    },
  ],
  [
    'delivery fails while the outcome is unknown',
    dispatched({ transportBroken: true, deliveryFailed: true }),
    { phase: 'remote_execution', outcome: 'unknown' },
  ],
  // remote_execution: SSH
  [
    'the command exits 0 and the channel closes',
    dispatched({ channel: 'ssh', ssh: { execReply: 'success', exitStatus: 0, channelClosed: true } }),
    { outcome: 'committed', effect: 'succeeded', code: null, outcome_basis: 'exit_status_and_channel_close' },
  ],
  [
    'the command exits 23',
    dispatched({ channel: 'ssh', ssh: { execReply: 'success', exitStatus: 23, channelClosed: true } }),
    { outcome: 'committed', effect: 'failed', code: 'COMMAND_FAILED', retry: 'never' },
  ],
  [
    'the command is killed by a signal',
    dispatched({ channel: 'ssh', ssh: { execReply: 'success', exitSignal: 'SIGTERM', channelClosed: true } }),
    { outcome: 'committed', effect: 'failed', code: 'COMMAND_FAILED', outcome_basis: 'exit_signal_and_channel_close' },
  ],
  [
    'exit status arrives then the stream breaks',
    dispatched({
      channel: 'ssh',
      transportBroken: true,
      ssh: { execReply: 'success', exitStatus: 0, channelClosed: false },
    }),
    { outcome: 'committed', outcome_basis: 'exit_status_received_stream_incomplete' },
  ],
  [
    'the channel closes without an exit status',
    dispatched({ channel: 'ssh', ssh: { execReply: 'success', channelClosed: true } }),
    {
      outcome: 'unknown',
      code: 'REMOTE_RESULT_INCOMPLETE',
      outcome_basis: 'no_exit_status_or_remote_process_identity',
      retry: 'reconcile',
    },
  ],
  [
    'the connection is lost without an exit status',
    dispatched({ channel: 'ssh', transportBroken: true, ssh: { channelClosed: false } }),
    { outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE' },
  ],
  [
    'the server refuses exec',
    dispatched({ channel: 'ssh', ssh: { execReply: 'failure', channelClosed: true } }),
    { outcome: 'rejected', code: 'REMOTE_REJECTED', effect: 'rejected' },
  ],
  [
    'the caller cancels after exec was requested',
    dispatched({ channel: 'ssh', caller: 'cancelled', ssh: { execReply: 'success', channelClosed: false } }),
    { outcome: 'unknown', effect: 'unknown_effect', code: 'CALLER_CANCELLED' },
  ],
  // mcp: a tools/call to an upstream MCP server
  [
    'a stdio MCP server fails to spawn (setup attempts remain)',
    { ...base, channel: 'mcp', setup: { failure: 'mcp_spawn', stage: 'spawn', attempts: 1, attemptsMax: 3 } },
    {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'backoff',
      code: 'MCP_SPAWN_FAILED',
      effect: 'no_effect',
      outcome_basis: 'connection_setup_failed_before_dispatch',
    },
  ],
  [
    'an MCP server never completes initialize (no setup attempts left)',
    {
      ...base,
      channel: 'mcp',
      setup: { failure: 'mcp_initialize', stage: 'initialize', attempts: 3, attemptsMax: 3 },
    },
    { outcome: 'not_attempted', retry: 'after_correction', code: 'MCP_INITIALIZE_FAILED', effect: 'no_effect' },
  ],
  [
    'a streamable_http MCP server refuses the connect',
    { ...base, channel: 'mcp', setup: { failure: 'connect_refused', stage: 'connect', attempts: 1, attemptsMax: 2 } },
    { phase: 'connection_setup', outcome: 'not_attempted', code: 'CONNECT_REFUSED', retry: 'backoff' },
  ],
  [
    'an MCP tool answers with a result',
    dispatched({ channel: 'mcp', mcp: { reply: 'result', complete: true } }),
    {
      phase: 'remote_execution',
      outcome: 'committed',
      effect: 'succeeded',
      code: null,
      retry: 'never',
      outcome_basis: 'complete_tool_result',
      source: 'remote_response',
    },
  ],
  [
    'an MCP tool answers isError: true (it ran; it may have changed state)',
    dispatched({ channel: 'mcp', mcp: { reply: 'tool_error', complete: true } }),
    {
      outcome: 'committed',
      effect: 'failed',
      code: 'MCP_TOOL_FAILED',
      retry: 'never',
      outcome_basis: 'tool_result_marked_error',
      source: 'remote_response',
    },
  ],
  ...[-32700, -32600, -32601, -32602].map((code): Row => [
    `an MCP server refuses the request as a request (JSON-RPC ${code})`,
    dispatched({ channel: 'mcp', mcp: { reply: 'protocol_error', protocolErrorCode: code, complete: true } }),
    {
      outcome: 'rejected',
      effect: 'rejected',
      code: 'REMOTE_REJECTED',
      retry: 'after_correction',
      outcome_basis: 'request_refused_before_tool_ran',
    },
  ]),
  ...[-32603, -32000, -32099, -1, 0, 1, 404].map((code): Row => [
    `an MCP server answers another JSON-RPC error (${code}): it may come from inside a tool that acted`,
    dispatched({ channel: 'mcp', mcp: { reply: 'protocol_error', protocolErrorCode: code, complete: true } }),
    {
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      retry: 'reconcile',
      outcome_basis: 'protocol_error_not_proof_of_no_effect',
      source: 'remote_response',
    },
  ]),
  [
    'a JSON-RPC error without a code is not a refusal',
    dispatched({ channel: 'mcp', mcp: { reply: 'protocol_error', complete: true } }),
    { outcome: 'unknown', code: 'REMOTE_OUTCOME_UNKNOWN' },
  ],
  ...[400, 401, 403, 404, 429].map((status): Row => [
    `a streamable_http server refuses the POST carrying the call with HTTP ${status}: no JSON-RPC processing ran`,
    dispatched({ channel: 'mcp', transportBroken: true, mcp: { complete: false, httpStatus: status } }),
    {
      outcome: 'rejected',
      effect: 'rejected',
      code: 'REMOTE_REJECTED',
      retry: 'after_correction',
      outcome_basis: 'http_status_refused_message',
    },
  ]),
  ...[408, 500, 502, 503].map((status): Row => [
    `a streamable_http server answers the call's POST with HTTP ${status}: the effect stays open`,
    dispatched({ channel: 'mcp', transportBroken: true, mcp: { complete: false, httpStatus: status } }),
    { outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE' },
  ]),
  [
    'a stdio child dies after the request was written, before answering',
    dispatched({ channel: 'mcp', transportBroken: true, mcp: { complete: false } }),
    {
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'REMOTE_RESULT_INCOMPLETE',
      retry: 'reconcile',
      outcome_basis: 'upstream_lost_after_request_written_no_reply',
    },
  ],
  [
    'an MCP session breaks after DISPATCH_STARTED, before the request was written',
    dispatched({ channel: 'mcp', handedToTransport: false, transportBroken: true, mcp: { complete: false } }),
    { outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE', outcome_basis: 'upstream_lost_after_dispatch_started' },
  ],
  [
    'a reply marked incomplete never settles, whatever it says',
    dispatched({ channel: 'mcp', transportBroken: true, mcp: { reply: 'result', complete: false } }),
    { outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE' },
  ],
  [
    'an MCP tool hangs until the operation deadline',
    dispatched({ channel: 'mcp', operationDeadline: true, mcp: { complete: false } }),
    {
      outcome: 'unknown',
      code: 'OPERATION_TIMEOUT',
      retry: 'reconcile',
      outcome_basis: 'operation_deadline_after_transport_write_no_remote_receipt',
    },
  ],
  [
    'the caller cancels while an MCP tool runs',
    dispatched({ channel: 'mcp', caller: 'cancelled', mcp: { complete: false } }),
    { outcome: 'unknown', effect: 'unknown_effect', code: 'CALLER_CANCELLED' },
  ],
  [
    'an MCP tool result that arrived before the caller cancelled still settles',
    dispatched({ channel: 'mcp', caller: 'cancelled', mcp: { reply: 'result', complete: true } }),
    { outcome: 'committed', effect: 'succeeded' },
  ],
  [
    'an MCP tool result is recorded but the handoff to the caller fails',
    dispatched({ channel: 'mcp', deliveryFailed: true, mcp: { reply: 'tool_error', complete: true } }),
    { outcome: 'committed', effect: 'failed', retry: 'fetch_result', code: 'RESULT_DELIVERY_FAILED' },
  ],
];

describe('classifyOutcome', () => {
  it.each(rows)('when %s', (_when, evidence, expected) => {
    expect(classifyOutcome(evidence)).toMatchObject(expected);
  });

  it('when nothing explains an undispatched action, it refuses to guess', () => {
    expect(() => classifyOutcome(base)).toThrow(/no gate/);
  });

  describe('for any evidence', () => {
    const evidence = fc.record({
      channel: fc.constantFrom('http' as const, 'ssh' as const, 'mcp' as const),
      dispatchStarted: fc.boolean(),
      connection: fc.constantFrom('fresh' as const, 'reused' as const),
      handedToTransport: fc.boolean(),
      requestComplete: fc.boolean(),
      transportBroken: fc.boolean(),
      idempotent: fc.boolean(),
      caller: fc.option(fc.constantFrom('cancelled' as const, 'deadline' as const, 'disconnected' as const), {
        nil: undefined,
      }),
      gate: fc.option(fc.constant({ kind: 'vault_locked' as const }), { nil: undefined }),
      http: fc.option(fc.record({ status: fc.integer({ min: 100, max: 599 }), framingComplete: fc.boolean() }), {
        nil: undefined,
      }),
      ssh: fc.option(
        fc.record({
          exitStatus: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
          channelClosed: fc.boolean(),
        }),
        { nil: undefined },
      ),
      mcp: fc.option(
        fc.record({
          reply: fc.option(fc.constantFrom('result' as const, 'tool_error' as const, 'protocol_error' as const), {
            nil: undefined,
          }),
          protocolErrorCode: fc.option(fc.integer({ min: -32800, max: 32800 }), { nil: undefined }),
          complete: fc.boolean(),
        }),
        { nil: undefined },
      ),
      setup: fc.option(
        fc.record({
          failure: fc.constantFrom('mcp_spawn' as const, 'mcp_initialize' as const, 'connect_refused' as const),
          stage: fc.constant('spawn'),
          attempts: fc.integer({ min: 1, max: 3 }),
          attemptsMax: fc.integer({ min: 1, max: 3 }),
        }),
        { nil: undefined },
      ),
      deliveryFailed: fc.boolean(),
    });

    it('never claims not_attempted after DISPATCH_STARTED, and only claims it before', () => {
      fc.assert(
        fc.property(evidence, (e) => {
          const input: OutcomeEvidence =
            e.dispatchStarted || e.gate || e.caller || e.setup ? e : { ...e, caller: 'cancelled' };
          const c = classifyOutcome(input);
          if (input.dispatchStarted) expect(c.outcome).not.toBe('not_attempted');
          else expect(c.outcome).toBe('not_attempted');
        }),
        { numRuns: 2000 },
      );
    });

    it('leaves unknown only by an idempotent repeat, a same-key retry or reconciliation', () => {
      fc.assert(
        fc.property(evidence, (e) => {
          const c = classifyOutcome({ ...e, dispatchStarted: true });
          if (c.outcome === 'unknown') expect(['backoff', 'same_idempotency_key', 'reconcile']).toContain(c.retry);
          if (c.outcome === 'unknown' && c.retry === 'backoff') expect(e.idempotent).toBe(true);
        }),
        { numRuns: 2000 },
      );
    });

    it('settles an MCP call only on a complete reply, and never lets a tool error pass for a refusal', () => {
      fc.assert(
        fc.property(evidence, (e) => {
          const c = classifyOutcome({ ...e, channel: 'mcp', dispatchStarted: true, deliveryFailed: false });
          if (c.outcome === 'committed' || c.outcome === 'rejected') expect(e.mcp?.complete).toBe(true);
          if (e.mcp?.complete === true && e.mcp.reply === 'tool_error') {
            expect(c).toMatchObject({ outcome: 'committed', effect: 'failed', retry: 'never' });
          }
          // No tool is assumed idempotent: nothing after dispatch invites an automatic repeat.
          if (!e.idempotent) expect(c.retry).not.toBe('backoff');
        }),
        { numRuns: 2000 },
      );
    });

    it('never lets a 5xx become a licence to replay a non-idempotent request', () => {
      fc.assert(
        fc.property(fc.integer({ min: 500, max: 599 }), (status) => {
          const c = classifyOutcome(dispatched({ http: response(status) }));
          expect(c.retry).not.toBe('backoff');
        }),
      );
    });
  });
});
