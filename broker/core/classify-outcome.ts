import type { Classification, ErrorCode, RetryDisposition } from '../contract/index.js';
import type { LocalGate, OutcomeEvidence, SetupFailure } from './outcome-evidence.js';

/**
 * Classifies what is known about an action from plain evidence (DESIGN.md §3 phase rules).
 * Pure: the same evidence always gives the same classification. The order of the checks is the
 * order of the dispatch boundary: before it only not_attempted is possible, after it only an
 * authoritative complete result can leave unknown.
 */
export function classifyOutcome(e: OutcomeEvidence): Classification {
  if (!e.dispatchStarted) return beforeDispatch(e);
  const settled = retryOutOfUnknown(e, afterDispatch(e));
  if (e.deliveryFailed === true && (settled.outcome === 'committed' || settled.outcome === 'rejected')) {
    // The remote result stands; only the handoff failed. Fetching it is a read, never a re-run.
    return {
      ...settled,
      phase: 'result_delivery',
      retry: 'fetch_result',
      code: 'RESULT_DELIVERY_FAILED',
      outcome_basis: 'result_recorded_delivery_failed',
    };
  }
  return settled;
}

function beforeDispatch(e: OutcomeEvidence): Classification {
  if (e.gate !== undefined) return gateClassification(e.gate);
  if (e.setup !== undefined) {
    const { failure, attempts, attemptsMax, retryAfterMs, noInternalRetry } = e.setup;
    const transient = transientSetupFailures.has(failure);
    const waitable = transient && retryAfterMs !== undefined;
    const againLater = attempts < attemptsMax || noInternalRetry === true;
    return {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: (transient && againLater) || waitable ? 'backoff' : 'after_correction',
      code: setupCodes[failure],
      effect: 'no_effect',
      outcome_basis: 'connection_setup_failed_before_dispatch',
      source: 'transport_observed',
      ...(waitable ? { retry_after_ms: Math.max(0, Math.ceil(retryAfterMs)) } : {}),
    };
  }
  if (e.caller === undefined && e.operationDeadline === true) {
    return {
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'backoff',
      code: 'OPERATION_TIMEOUT',
      effect: 'no_effect',
      outcome_basis: 'operation_deadline_before_dispatch',
      source: 'local_gate',
    };
  }
  if (e.caller !== undefined) {
    const caller = callerBeforeDispatch[e.caller];
    return {
      phase: 'credential_injection',
      outcome: 'not_attempted',
      retry: caller.retry,
      code: caller.code,
      effect: 'no_effect',
      outcome_basis: caller.basis,
      source: 'local_gate',
    };
  }
  throw new Error('classifyOutcome: no gate, setup failure or caller event explains an undispatched action');
}

function gateClassification(gate: LocalGate): Classification {
  const local = (
    phase: Classification['phase'],
    code: ErrorCode,
    retry: RetryDisposition,
    basis: string,
  ): Classification => ({
    phase,
    outcome: 'not_attempted',
    retry,
    code,
    effect: 'no_effect',
    outcome_basis: basis,
    source: 'local_gate',
  });
  switch (gate.kind) {
    case 'validation':
      return local('validation', gate.code, 'after_correction', 'rejected_by_preflight_validation');
    case 'fingerprint_mismatch':
      return local('validation', 'FINGERPRINT_MISMATCH', 'after_correction', 'fingerprint_changed_after_approval');
    case 'idempotency_mismatch':
      return local(
        'validation',
        'IDEMPOTENCY_MISMATCH',
        'after_correction',
        'idempotency_key_reused_with_other_fingerprint',
      );
    case 'vault_locked':
      // Nothing was sent and nothing in the call is wrong: the same call is safe once a person unlocks the vault.
      return local('credential_injection', 'VAULT_LOCKED', 'backoff', 'vault_locked_before_dispatch');
    case 'credential_missing':
      return local(
        'credential_injection',
        'CREDENTIAL_MISSING',
        'after_correction',
        'credential_missing_before_dispatch',
      );
    case 'approval_denied':
      return local('credential_injection', 'APPROVAL_DENIED', 'never', 'approval_denied_before_dispatch');
    case 'approval_expired':
      return local('credential_injection', 'APPROVAL_EXPIRED', 'never', 'approval_expired_before_dispatch');
    case 'session_revoked':
      return local('credential_injection', 'SESSION_REVOKED', 'never', 'session_revoked_before_dispatch');
    case 'session_ended':
      return local('credential_injection', 'SESSION_ENDED', 'never', 'session_ended_before_dispatch');
    case 'operator_cancelled':
      return local('credential_injection', 'APPROVAL_DENIED', 'never', 'cancelled_by_operator_before_dispatch');
    case 'recording_unavailable':
      return local(
        'credential_injection',
        'RECORDING_UNAVAILABLE',
        'after_correction',
        'recording_unavailable_before_dispatch',
      );
    case 'oauth_token_unavailable':
      return local(
        'credential_injection',
        'OAUTH_TOKEN_UNAVAILABLE',
        gate.transient ? 'backoff' : 'after_correction',
        'oauth_token_unavailable_before_dispatch',
      );
  }
}

function afterDispatch(e: OutcomeEvidence): Classification {
  switch (e.channel) {
    case 'http':
      return httpAfterDispatch(e);
    case 'ssh':
      return sshAfterDispatch(e);
    case 'mcp':
      return mcpAfterDispatch(e);
  }
}

function httpAfterDispatch(e: OutcomeEvidence): Classification {
  const http = e.http;
  const status = http?.status;
  if (http !== undefined && status !== undefined && status >= 200) {
    if (!http.framingComplete) {
      return unknown(e, 'REMOTE_RESULT_INCOMPLETE', 'response_framing_incomplete');
    }
    return completeHttpResponse(e, status, http);
  }
  if (
    http?.informationalOnly === true &&
    e.caller === undefined &&
    e.operationDeadline !== true &&
    e.transportBroken !== true
  ) {
    // 1xx never settles: the invocation is still in progress.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'informational_response_only');
  }
  return noResultAfterDispatch(e);
}

function completeHttpResponse(
  e: OutcomeEvidence,
  status: number,
  http: NonNullable<OutcomeEvidence['http']>,
): Classification {
  const remote = (
    outcome: 'committed' | 'rejected',
    effect: Classification['effect'],
    code: ErrorCode | null,
    retry: RetryDisposition,
    basis: string,
  ): Classification => {
    const c: Classification = {
      phase: 'remote_execution',
      outcome,
      retry,
      code,
      effect,
      outcome_basis: basis,
      source: 'remote_response',
    };
    if (retry === 'backoff' && http.retryAfterMs !== undefined) c.retry_after_ms = http.retryAfterMs;
    return c;
  };
  if (http.fromProxy === true || status === 502 || status === 504) {
    // Evidence from a hop, not from the origin: the origin may have acted on what it received.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'intermediary_response_not_origin_result');
  }
  if (status === 408) {
    // 408 describes one observer's wait, not proof that nothing acted on the bytes received.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'request_timeout_status_not_proof_of_no_effect');
  }
  if (status === 202)
    return remote('committed', 'succeeded', null, 'never', 'submission_accepted_track_job_separately');
  if (status < 300) return remote('committed', 'succeeded', null, 'never', 'complete_response');
  if (status < 400) {
    if (http.redirectBlocked === true)
      return remote('committed', 'failed', 'REDIRECT_BLOCKED', 'after_correction', 'redirect_not_followed');
    // 303 (See Other) answers the request itself, elsewhere; 304 is a conditional request's success. Every other 3xx
    // asks for the request to be sent again at another URI: it was not carried out here, so no success is claimed.
    if (status === 303 || status === 304) return remote('committed', 'succeeded', null, 'never', 'complete_response');
    return remote(
      'committed',
      'failed',
      'REDIRECT_NOT_FOLLOWED',
      'after_correction',
      'redirect_not_followed_same_origin',
    );
  }
  if (status === 401)
    return remote('rejected', 'rejected', 'REMOTE_AUTH_REJECTED', 'never', 'credential_rejected_by_remote');
  if (status === 429 || (status === 503 && e.idempotent)) {
    return e.idempotent
      ? remote('rejected', 'rejected', 'REMOTE_THROTTLED', 'backoff', 'remote_asked_to_slow_down')
      : remote('rejected', 'rejected', 'REMOTE_THROTTLED', 'never', 'remote_asked_to_slow_down_not_idempotent');
  }
  if (status < 500) return remote('rejected', 'rejected', 'REMOTE_REJECTED', 'after_correction', 'complete_refusal');
  // A complete 5xx is a known result: the remote may have changed state before failing.
  return remote(
    'committed',
    'failed',
    'REMOTE_ERROR_STATUS',
    e.idempotent ? 'backoff' : 'never',
    'complete_error_response',
  );
}

function sshAfterDispatch(e: OutcomeEvidence): Classification {
  const ssh = e.ssh;
  const remote = (effect: Classification['effect'], code: ErrorCode | null, basis: string): Classification => ({
    phase: 'remote_execution',
    outcome: 'committed',
    retry: 'never',
    code,
    effect,
    outcome_basis: basis,
    source: 'remote_response',
  });
  if (ssh?.exitStatus !== undefined) {
    // The exit status settles the command; a stream broken afterwards only marks output incomplete.
    const basis = ssh.channelClosed ? 'exit_status_and_channel_close' : 'exit_status_received_stream_incomplete';
    return ssh.exitStatus === 0 ? remote('succeeded', null, basis) : remote('failed', 'COMMAND_FAILED', basis);
  }
  if (ssh?.exitSignal !== undefined) {
    const basis = ssh.channelClosed ? 'exit_signal_and_channel_close' : 'exit_signal_received_stream_incomplete';
    return remote('failed', 'COMMAND_FAILED', basis);
  }
  if (ssh?.execReply === 'failure') {
    return {
      phase: 'remote_execution',
      outcome: 'rejected',
      retry: 'after_correction',
      code: 'REMOTE_REJECTED',
      effect: 'rejected',
      outcome_basis: 'exec_refused_by_server',
      source: 'remote_response',
    };
  }
  const noBrokerStop = e.caller === undefined && e.operationDeadline !== true && e.vaultLocked !== true;
  if (noBrokerStop && !e.handedToTransport && ssh?.unsolicitedReply !== undefined) {
    // The server answered a request never written: it broke the protocol, so the exec request never was. The channel
    // did not end; DISPATCH_STARTED is durable, so never not_attempted.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'unsolicited_reply_after_dispatch_started_exec_not_sent');
  }
  if (noBrokerStop && (ssh?.channelClosed === true || e.transportBroken === true)) {
    // DISPATCH_STARTED is durable, so never not_attempted; the basis says the exec request was never written.
    if (!e.handedToTransport)
      return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'channel_ended_after_dispatch_started_exec_not_sent');
    return unknown(e, 'REMOTE_RESULT_INCOMPLETE', 'no_exit_status_or_remote_process_identity');
  }
  return noResultAfterDispatch(e);
}

/**
 * JSON-RPC errors that refuse the message as a request (parse error, invalid request, method not found, invalid
 * params): the server answered before any tool ran. Every other code (internal error, server-defined -32000…-32099,
 * anything else) may come from inside a tool that already acted, so it proves nothing about the effect.
 */
const mcpRequestRefusedCodes: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602]);

function mcpHttpRefused(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408;
}

function mcpAfterDispatch(e: OutcomeEvidence): Classification {
  const mcp = e.mcp;
  const remote = (
    outcome: 'committed' | 'rejected',
    effect: Classification['effect'],
    code: ErrorCode | null,
    retry: RetryDisposition,
    basis: string,
  ): Classification => ({
    phase: 'remote_execution',
    outcome,
    retry,
    code,
    effect,
    outcome_basis: basis,
    source: 'remote_response',
  });
  if (mcp?.complete === true && mcp.reply === 'result') {
    return remote('committed', 'succeeded', null, 'never', 'complete_tool_result');
  }
  if (mcp?.complete === true && mcp.reply === 'tool_error') {
    // The tool ran and says it failed: a complete result, like exit status 23, never a refusal. MCP promises nothing
    // about a failed tool's effects (it may have written half), so `failed` (remote may have changed state), and no
    // automatic retry: a tool is never assumed idempotent.
    return remote('committed', 'failed', 'MCP_TOOL_FAILED', 'never', 'tool_result_marked_error');
  }
  if (mcp?.complete === true && mcp.reply === 'protocol_error') {
    if (mcp.protocolErrorCode !== undefined && mcpRequestRefusedCodes.has(mcp.protocolErrorCode)) {
      return remote('rejected', 'rejected', 'REMOTE_REJECTED', 'after_correction', 'request_refused_before_tool_ran');
    }
    // The server answered, so the source is its reply; what the reply says leaves the effect open.
    return {
      ...unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'protocol_error_not_proof_of_no_effect'),
      source: 'remote_response',
    };
  }
  if (mcp?.httpStatus !== undefined && mcpHttpRefused(mcp.httpStatus)) {
    // Streamable HTTP answers a message it does not accept (authentication, a lost session, a malformed request) with
    // a 4xx before any JSON-RPC processing: the tool never ran. 408 says only that the server stopped waiting.
    return remote('rejected', 'rejected', 'REMOTE_REJECTED', 'after_correction', 'http_status_refused_message');
  }
  if (e.caller === undefined && e.operationDeadline !== true && e.transportBroken === true) {
    // The child died, the session broke or the reply outgrew its bound after the request was handed over.
    return unknown(
      e,
      'REMOTE_RESULT_INCOMPLETE',
      e.handedToTransport ? 'upstream_lost_after_request_written_no_reply' : 'upstream_lost_after_dispatch_started',
    );
  }
  return noResultAfterDispatch(e);
}

/** Dispatched and no deciding result: the caller's event is the cause, the effect stays unknown. */
function noResultAfterDispatch(e: OutcomeEvidence): Classification {
  if (e.caller === 'cancelled') {
    return unknown(
      e,
      'CALLER_CANCELLED',
      e.handedToTransport
        ? 'cancellation_after_transport_write_no_remote_receipt'
        : 'cancellation_after_dispatch_started',
    );
  }
  if (e.caller === 'deadline') {
    return unknown(
      e,
      'CALLER_DEADLINE_EXCEEDED',
      e.handedToTransport ? 'deadline_after_transport_write_no_remote_receipt' : 'deadline_after_dispatch_started',
    );
  }
  if (e.caller === 'disconnected') {
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'caller_disconnected_after_dispatch');
  }
  if (e.vaultLocked === true && !e.handedToTransport) {
    // A person locked the vault while DISPATCH_STARTED was being made durable: nothing was handed over, but the row is
    // durable, so unknown (never not_attempted). VAULT_LOCKED would tell the caller to just retry after an unlock.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'vault_locked_after_dispatch_started');
  }
  if (e.operationDeadline === true) {
    return unknown(
      e,
      'OPERATION_TIMEOUT',
      e.handedToTransport
        ? 'operation_deadline_after_transport_write_no_remote_receipt'
        : 'operation_deadline_after_dispatch_started',
    );
  }
  if (e.connection === 'reused' && e.transportBroken === true) {
    // A broken pipe on a pooled connection says little about what the peer already read.
    return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'reused_connection_broke_after_handoff');
  }
  return unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'response_not_observed_after_dispatch');
}

function unknown(e: OutcomeEvidence, code: ErrorCode, basis: string): Classification {
  return {
    phase: 'remote_execution',
    outcome: 'unknown',
    retry: unknownRetry(e),
    code,
    effect: 'unknown_effect',
    outcome_basis: basis,
    source: 'transport_observed',
  };
}

/**
 * A retry's answer is about the retry. Out of unknown it settles the action only as a success: the idempotent repeat or
 * same-key retry did what the action asked. A refusal or an error status of the retry (a DELETE's repeat answered 404, a
 * same-key POST answered 409 "in progress" or 429) says nothing of what the earlier attempt did, so the action stays
 * unknown (DESIGN §3: unknown is left by an idempotent repeat, a same-key retry, a lookup or a person — by what they
 * establish, not by any answer they get).
 */
function retryOutOfUnknown(e: OutcomeEvidence, c: Classification): Classification {
  if (e.earlierAttemptUnknown !== true || c.outcome === 'unknown') return c;
  if (c.outcome === 'committed' && c.effect === 'succeeded') return c;
  return {
    ...unknown(e, 'REMOTE_OUTCOME_UNKNOWN', 'retry_answer_does_not_settle_earlier_attempt'),
    source: 'remote_response',
  };
}

/** The only automatic ways out of unknown: an idempotent repeat or a same-key retry; else reconcile. */
function unknownRetry(e: OutcomeEvidence): RetryDisposition {
  if (e.idempotent) return 'backoff';
  if (e.idempotencyContract?.withinRetention === true) return 'same_idempotency_key';
  return 'reconcile';
}

const transientSetupFailures: ReadonlySet<SetupFailure> = new Set<SetupFailure>([
  'dns_temporary',
  'connect_refused',
  'connect_timeout',
  'network_unreachable',
  'tls_handshake',
  'proxy_tunnel',
  'ssh_transport',
  'ssh_channel',
  // A crashed child is restarted with backoff, and a slow initialize may pass; the channel sets attemptsMax to stop.
  'mcp_spawn',
  'mcp_initialize',
]);

const setupCodes: Readonly<Record<SetupFailure, ErrorCode>> = {
  dns_not_found: 'DNS_FAILED',
  dns_temporary: 'DNS_FAILED',
  connect_refused: 'CONNECT_REFUSED',
  connect_timeout: 'CONNECT_TIMEOUT',
  network_unreachable: 'NETWORK_UNREACHABLE',
  tls_certificate: 'TLS_FAILED',
  tls_handshake: 'TLS_FAILED',
  address_forbidden: 'INVALID_TARGET',
  proxy_tunnel: 'PROXY_FAILED',
  ssh_transport: 'SSH_TRANSPORT_FAILED',
  ssh_host_key: 'SSH_HOST_KEY_REJECTED',
  ssh_known_hosts: 'SSH_KNOWN_HOSTS_UNTRUSTED',
  ssh_auth: 'SSH_AUTH_FAILED',
  ssh_channel: 'SSH_CHANNEL_FAILED',
  ssh_channel_refused: 'SSH_CHANNEL_FAILED',
  ssh_channel_protocol: 'SSH_CHANNEL_FAILED',
  mcp_spawn: 'MCP_SPAWN_FAILED',
  mcp_initialize: 'MCP_INITIALIZE_FAILED',
  mcp_authorization: 'MCP_AUTHORIZATION_REQUIRED',
};

const callerBeforeDispatch: Readonly<
  Record<NonNullable<OutcomeEvidence['caller']>, { code: ErrorCode; retry: RetryDisposition; basis: string }>
> = {
  cancelled: { code: 'CALLER_CANCELLED', retry: 'never', basis: 'cancellation_observed_before_dispatch' },
  disconnected: { code: 'CALLER_CANCELLED', retry: 'never', basis: 'caller_disconnected_before_dispatch' },
  deadline: { code: 'CALLER_DEADLINE_EXCEEDED', retry: 'backoff', basis: 'deadline_observed_before_dispatch' },
};
