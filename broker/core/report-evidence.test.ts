import { describe, expect, it } from 'vitest';
import type { ErrorCode, RetryDisposition } from '../contract/index.js';
import { classifyOutcome } from './classify-outcome.js';
import type { OutcomeEvidence, SetupFailure } from './outcome-evidence.js';
import {
  earlierAttemptUnknown,
  httpReportEvidence,
  mcpReportEvidence,
  sshReportEvidence,
  type HttpReportContext,
  type HttpReportFacts,
  type McpReportFacts,
  type SshReportFacts,
} from './report-evidence.js';

const context: HttpReportContext = {
  locationElsewhere: false,
  idempotent: false,
  nowMs: 1_000_000,
  retryAfterMsMax: 60_000,
};

const httpNothingSent: HttpReportFacts = {
  dispatchStarted: false,
  handedToTransport: false,
  requestComplete: false,
  transportBroken: false,
  operationDeadline: false,
};
const httpSent: HttpReportFacts = {
  ...httpNothingSent,
  dispatchStarted: true,
  connection: 'fresh',
  handedToTransport: true,
  requestComplete: true,
};
const httpBase: OutcomeEvidence = {
  channel: 'http',
  dispatchStarted: false,
  handedToTransport: false,
  requestComplete: false,
  transportBroken: false,
  idempotent: false,
};
const httpSentEvidence: OutcomeEvidence = {
  ...httpBase,
  dispatchStarted: true,
  connection: 'fresh',
  handedToTransport: true,
  requestComplete: true,
};
const respond = (status: number, headers: Record<string, string> = {}, framingComplete = true) => ({
  ...httpSent,
  response: { status, headers, framingComplete },
});
const setup = { failure: 'connect_refused', stage: 'tcp', attempts: 2, attemptsMax: 2 } as const;

type HttpRow = [when: string, report: HttpReportFacts, over: Partial<HttpReportContext>, expected: OutcomeEvidence];

const httpRows: HttpRow[] = [
  ['setup failed on every fresh attempt', { ...httpNothingSent, setup }, {}, { ...httpBase, setup }],
  [
    'the vault locked before dispatch',
    { ...httpNothingSent, stoppedBeforeDispatch: 'signal' },
    {},
    { ...httpBase, gate: { kind: 'vault_locked' } },
  ],
  [
    'the final request is one the client would refuse, naming its field',
    { ...httpNothingSent, stoppedBeforeDispatch: 'request_refused', requestRefused: { field: 'headers.x-token' } },
    {},
    { ...httpBase, gate: { kind: 'validation', code: 'INVALID_ARGUMENT', field: 'headers.x-token' } },
  ],
  [
    'the final request is refused without a named field',
    { ...httpNothingSent, stoppedBeforeDispatch: 'request_refused' },
    {},
    { ...httpBase, gate: { kind: 'validation', code: 'INVALID_ARGUMENT', field: 'request' } },
  ],
  [
    'the operation deadline fired before dispatch',
    { ...httpNothingSent, stoppedBeforeDispatch: 'deadline' },
    {},
    { ...httpBase, operationDeadline: true },
  ],
  [
    'the operation deadline fired after dispatch, nothing back',
    { ...httpSent, operationDeadline: true },
    {},
    { ...httpSentEvidence, operationDeadline: true },
  ],
  [
    'the connection broke on a reused connection after the request was sent',
    { ...httpSent, connection: 'reused', transportBroken: true },
    { idempotent: true },
    { ...httpSentEvidence, connection: 'reused', transportBroken: true, idempotent: true },
  ],
  [
    'only an informational response arrived',
    { ...httpSent, informationalSeen: true, transportBroken: true },
    {},
    { ...httpSentEvidence, transportBroken: true, http: { informationalOnly: true, framingComplete: false } },
  ],
  [
    'a complete 200',
    respond(200),
    {},
    { ...httpSentEvidence, http: { status: 200, framingComplete: true, fromProxy: false, redirectBlocked: false } },
  ],
  [
    'a 502 an intermediary produced, cut short',
    respond(502, { 'proxy-status': 'edge; error=connection_refused' }, false),
    {},
    { ...httpSentEvidence, http: { status: 502, framingComplete: false, fromProxy: true, redirectBlocked: false } },
  ],
  [
    'a 429 with Retry-After in seconds (capped at the limit)',
    respond(429, { 'retry-after': '120' }),
    {},
    {
      ...httpSentEvidence,
      http: { status: 429, framingComplete: true, fromProxy: false, redirectBlocked: false, retryAfterMs: 60_000 },
    },
  ],
  [
    'a 503 with a Retry-After that is no timing advice',
    respond(503, { 'retry-after': 'soon' }),
    {},
    { ...httpSentEvidence, http: { status: 503, framingComplete: true, fromProxy: false, redirectBlocked: false } },
  ],
  [
    'a redirect to another origin',
    respond(302, { location: 'https://elsewhere.example.test/login' }),
    { locationElsewhere: true },
    { ...httpSentEvidence, http: { status: 302, framingComplete: true, fromProxy: false, redirectBlocked: true } },
  ],
  [
    'a redirect within the origin',
    respond(301, { location: '/v2/items' }),
    {},
    { ...httpSentEvidence, http: { status: 301, framingComplete: true, fromProxy: false, redirectBlocked: false } },
  ],
  [
    'a cross-origin Location on a 200 is no redirect',
    respond(200, { location: 'https://elsewhere.example.test/' }),
    { locationElsewhere: true },
    { ...httpSentEvidence, http: { status: 200, framingComplete: true, fromProxy: false, redirectBlocked: false } },
  ],
  [
    "under a contract, inside the key's window",
    { ...httpSent, transportBroken: true },
    { keyExpiresAtMs: 1_000_001 },
    { ...httpSentEvidence, transportBroken: true, idempotencyContract: { withinRetention: true } },
  ],
  [
    "under a contract, the key's window passed (the expiry itself is past)",
    { ...httpSent, transportBroken: true },
    { keyExpiresAtMs: 1_000_000 },
    { ...httpSentEvidence, transportBroken: true, idempotencyContract: { withinRetention: false } },
  ],
];

describe('httpReportEvidence: one row per report shape', () => {
  it.each(httpRows)('%s', (_when, report, over, expected) => {
    expect(httpReportEvidence(report, { ...context, ...over })).toStrictEqual(expected);
  });
});

const sshNothingSent: SshReportFacts = {
  dispatchStarted: false,
  handedToTransport: false,
  requestComplete: false,
  channelClosed: false,
  transportBroken: false,
};
const sshSent: SshReportFacts = {
  ...sshNothingSent,
  dispatchStarted: true,
  handedToTransport: true,
  requestComplete: true,
};
const sshBase: OutcomeEvidence = {
  channel: 'ssh',
  dispatchStarted: false,
  connection: 'fresh',
  handedToTransport: false,
  requestComplete: false,
  transportBroken: false,
  idempotent: false,
};
const sshSentEvidence: OutcomeEvidence = {
  ...sshBase,
  dispatchStarted: true,
  handedToTransport: true,
  requestComplete: true,
};
const sshSetup = { failure: 'ssh_host_key', stage: 'host_key', attempts: 1, attemptsMax: 1 } as const;

const sshRows: Array<[when: string, report: SshReportFacts, expected: OutcomeEvidence]> = [
  [
    'setup failed (host key): the channel never retries setup itself',
    { ...sshNothingSent, setup: sshSetup },
    { ...sshBase, setup: { ...sshSetup, noInternalRetry: true } },
  ],
  [
    'the vault locked before dispatch',
    { ...sshNothingSent, stoppedBeforeDispatch: 'signal' },
    { ...sshBase, gate: { kind: 'vault_locked' } },
  ],
  [
    'the caller cancelled before dispatch',
    { ...sshNothingSent, stoppedBeforeDispatch: 'cancelled' },
    { ...sshBase, caller: 'cancelled' },
  ],
  [
    'the operation deadline fired before dispatch',
    { ...sshNothingSent, stoppedBeforeDispatch: 'deadline' },
    { ...sshBase, operationDeadline: true },
  ],
  [
    'exit status 0, channel closed',
    { ...sshSent, execReply: 'success', exitStatus: 0, channelClosed: true },
    { ...sshSentEvidence, ssh: { channelClosed: true, execReply: 'success', exitStatus: 0 } },
  ],
  [
    'killed by a signal',
    { ...sshSent, execReply: 'success', exitSignal: 'KILL', channelClosed: true },
    { ...sshSentEvidence, ssh: { channelClosed: true, execReply: 'success', exitSignal: 'KILL' } },
  ],
  [
    'the exec request was refused',
    { ...sshSent, execReply: 'failure', channelClosed: true },
    { ...sshSentEvidence, ssh: { channelClosed: true, execReply: 'failure' } },
  ],
  [
    'the connection was lost after the exec request was sent, before any reply',
    { ...sshSent, transportBroken: true },
    { ...sshSentEvidence, transportBroken: true, ssh: { channelClosed: false } },
  ],
  [
    'the caller cancelled after dispatch',
    { ...sshSent, caller: 'cancelled', execReply: 'success' },
    { ...sshSentEvidence, caller: 'cancelled', ssh: { channelClosed: false, execReply: 'success' } },
  ],
  [
    'the operation deadline fired after dispatch',
    { ...sshSent, operationDeadline: true, execReply: 'success' },
    { ...sshSentEvidence, operationDeadline: true, ssh: { channelClosed: false, execReply: 'success' } },
  ],
  [
    'an exit reported before dispatch is not evidence (nothing was sent)',
    { ...sshNothingSent, exitStatus: 0, channelClosed: true },
    sshBase,
  ],
];

describe('sshReportEvidence: one row per report shape', () => {
  it.each(sshRows)('%s', (_when, report, expected) => {
    expect(sshReportEvidence(report)).toStrictEqual(expected);
  });
});

/** Every setup failure the SSH channel reports, at its stage: what the agent is told to do about it. */
const sshSetupRetries: Array<[failure: SetupFailure, stage: string, code: ErrorCode, retry: RetryDisposition]> = [
  ['dns_temporary', 'dns', 'DNS_FAILED', 'backoff'],
  ['dns_not_found', 'dns', 'DNS_FAILED', 'after_correction'],
  ['connect_refused', 'tcp_connect', 'CONNECT_REFUSED', 'backoff'],
  ['connect_timeout', 'tcp_connect', 'CONNECT_TIMEOUT', 'backoff'],
  ['network_unreachable', 'tcp_connect', 'NETWORK_UNREACHABLE', 'backoff'],
  ['ssh_transport', 'ssh_transport', 'SSH_TRANSPORT_FAILED', 'backoff'],
  ['ssh_transport', 'user_auth', 'SSH_TRANSPORT_FAILED', 'backoff'],
  ['ssh_channel', 'session_channel', 'SSH_CHANNEL_FAILED', 'backoff'],
  ['ssh_channel_refused', 'session_channel', 'SSH_CHANNEL_FAILED', 'after_correction'],
  ['ssh_channel_protocol', 'session_channel', 'SSH_CHANNEL_FAILED', 'after_correction'],
  ['ssh_host_key', 'host_key_verified', 'SSH_HOST_KEY_REJECTED', 'after_correction'],
  ['ssh_known_hosts', 'host_key_verified', 'SSH_KNOWN_HOSTS_UNTRUSTED', 'after_correction'],
  ['ssh_auth', 'user_auth', 'SSH_AUTH_FAILED', 'after_correction'],
];

describe('an SSH setup failure (one attempt, never retried by the channel): a transient one says backoff', () => {
  it.each(sshSetupRetries)('%s at %s: %s, retry %s', (failure, stage, code, retry) => {
    const setup = { failure, stage, attempts: 1, attemptsMax: 1 };
    expect(classifyOutcome(sshReportEvidence({ ...sshNothingSent, setup }))).toMatchObject({
      phase: 'connection_setup',
      outcome: 'not_attempted',
      effect: 'no_effect',
      code,
      retry,
    });
  });
});

const mcpNothingSent: McpReportFacts = { dispatchStarted: false, handedToTransport: false, transportBroken: false };
const mcpSent: McpReportFacts = {
  ...mcpNothingSent,
  dispatchStarted: true,
  connection: 'reused',
  handedToTransport: true,
};
const mcpBase: OutcomeEvidence = {
  channel: 'mcp',
  dispatchStarted: false,
  handedToTransport: false,
  requestComplete: false,
  transportBroken: false,
  idempotent: false,
};
const mcpSentEvidence: OutcomeEvidence = {
  ...mcpBase,
  dispatchStarted: true,
  connection: 'reused',
  handedToTransport: true,
  requestComplete: true,
};
const mcpSetup = { failure: 'mcp_spawn', stage: 'spawn', attempts: 1, attemptsMax: 1 } as const;

const mcpRows: Array<[when: string, report: McpReportFacts, expected: OutcomeEvidence]> = [
  ['setup failed (spawn)', { ...mcpNothingSent, setup: mcpSetup }, { ...mcpBase, setup: mcpSetup }],
  [
    'the vault locked before dispatch',
    { ...mcpNothingSent, stoppedBeforeDispatch: 'signal' },
    { ...mcpBase, gate: { kind: 'vault_locked' } },
  ],
  [
    'the caller cancelled before dispatch',
    { ...mcpNothingSent, stoppedBeforeDispatch: 'cancelled' },
    { ...mcpBase, caller: 'cancelled' },
  ],
  [
    'the operation deadline fired before dispatch',
    { ...mcpNothingSent, stoppedBeforeDispatch: 'deadline' },
    { ...mcpBase, operationDeadline: true },
  ],
  [
    'a tool result',
    { ...mcpSent, reply: { kind: 'result' } },
    { ...mcpSentEvidence, mcp: { reply: 'result', complete: true } },
  ],
  [
    'a tool result marked isError',
    { ...mcpSent, reply: { kind: 'tool_error' } },
    { ...mcpSentEvidence, mcp: { reply: 'tool_error', complete: true } },
  ],
  [
    'a JSON-RPC error keeps its code',
    { ...mcpSent, reply: { kind: 'protocol_error', code: -32602 } },
    { ...mcpSentEvidence, mcp: { reply: 'protocol_error', protocolErrorCode: -32602, complete: true } },
  ],
  [
    'the child died after the request was written, before any reply',
    { ...mcpSent, transportBroken: true },
    { ...mcpSentEvidence, transportBroken: true, mcp: { complete: false } },
  ],
  [
    'the caller cancelled after dispatch',
    { ...mcpSent, caller: 'cancelled' },
    { ...mcpSentEvidence, caller: 'cancelled', mcp: { complete: false } },
  ],
  [
    'the operation deadline fired after dispatch',
    { ...mcpSent, operationDeadline: true },
    { ...mcpSentEvidence, operationDeadline: true, mcp: { complete: false } },
  ],
  [
    'DISPATCH_STARTED durable, the request not yet written',
    { ...mcpSent, connection: 'fresh', handedToTransport: false, transportBroken: true },
    {
      ...mcpSentEvidence,
      connection: 'fresh',
      handedToTransport: false,
      requestComplete: false,
      transportBroken: true,
      mcp: { complete: false },
    },
  ],
  [
    'the stdin write began but did not finish before the child died',
    { ...mcpSent, requestComplete: false, transportBroken: true },
    { ...mcpSentEvidence, requestComplete: false, transportBroken: true, mcp: { complete: false } },
  ],
  [
    'a reply reported before dispatch is not evidence (nothing was sent)',
    { ...mcpNothingSent, reply: { kind: 'result' } },
    mcpBase,
  ],
];

describe('mcpReportEvidence: one row per report shape', () => {
  it.each(mcpRows)('%s', (_when, report, expected) => {
    expect(mcpReportEvidence(report)).toStrictEqual(expected);
  });
});

describe('earlierAttemptUnknown: whether an attempt retries out of unknown', () => {
  const attempt = (n: number, state: 'dispatched' | 'setup_failed') => ({ n, state });
  it('the first attempt, or one after attempts that never crossed dispatch, does not', () => {
    expect(earlierAttemptUnknown({ attempts: [attempt(1, 'dispatched')], lease: null }, 1)).toBe(false);
    expect(
      earlierAttemptUnknown({ attempts: [attempt(1, 'setup_failed'), attempt(2, 'dispatched')], lease: null }, 2),
    ).toBe(false);
  });
  it('a retry after a dispatched attempt under an idempotent-repeat or same-key lease does', () => {
    for (const decision of ['RETRY_NEW_ATTEMPT', 'RETRY_SAME_KEY', null])
      expect(
        earlierAttemptUnknown(
          { attempts: [attempt(1, 'dispatched'), attempt(2, 'dispatched')], lease: { decision } },
          2,
        ),
      ).toBe(true);
  });
  it('a retry after an authoritative throttle (RETRY_WHEN_ALLOWED: the earlier attempt was rejected) does not', () => {
    expect(
      earlierAttemptUnknown(
        { attempts: [attempt(1, 'dispatched'), attempt(2, 'dispatched')], lease: { decision: 'RETRY_WHEN_ALLOWED' } },
        2,
      ),
    ).toBe(false);
  });
});
