import type { SetupFailure } from '../core/index.js';
import { envelopeAttempts, type ReportedAttempt } from './envelope-attempts.js';
import { envelopeError } from './envelope-error.js';
import { envelopeSchema, type ActionState, type Classification, type Envelope } from '../contract/index.js';

/**
 * The part of the MCP channel's report the envelope reads (broker/channels/mcp McpChannelReport is one). Declared
 * here, structurally, so the envelope needs nothing of the channel but what it observed.
 */
export interface McpEnvelopeReport {
  readonly setup?: { readonly failure: SetupFailure; readonly stage: string };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'cancelled';
  readonly dispatchStarted: boolean;
  readonly requestComplete: boolean;
  readonly caller?: 'cancelled';
  readonly reply?:
    { readonly kind: 'result' | 'tool_error' } | { readonly kind: 'protocol_error'; readonly code: number };
  readonly connectionId?: string;
}

export interface McpEnvelopeFacts {
  /** The action's state after the closing event (its seq is the journal_seq the envelope cites). */
  readonly state: ActionState;
  readonly classification: Classification;
  readonly message: string;
  readonly field?: string;
  readonly report?: McpEnvelopeReport;
  readonly resultId?: string;
  /** The digest of the reply as stored and delivered (scrubbed, capped), never the wire digest. */
  readonly resultDigest?: string;
  readonly fingerprint?: string;
}

/**
 * The DESIGN §3 public envelope for an upstream MCP tool call, from recorded facts only. The reply itself travels
 * beside it (the answer's `mcp_result`); the envelope says how the broker knows. For MCP,
 * `response_headers_received` and `response_complete` both mean the JSON-RPC reply to tools/call arrived whole: a
 * reply is one message, parsed or not at all. A stdio child has no peer identity to cite, and the HTTP status of a
 * streamable_http POST is transport detail, not the tool's answer, so neither is shown.
 */
export function buildMcpEnvelope(f: McpEnvelopeFacts): Envelope {
  const c = f.classification;
  const r = f.report;
  const last = f.state.attempts.at(-1);
  const replied = r === undefined ? (last?.response_complete ?? false) : r.dispatchStarted && r.reply !== undefined;
  const cancelled = r?.caller === 'cancelled' || r?.stoppedBeforeDispatch === 'cancelled';
  const envelope: Envelope = {
    invocation_id: f.state.action_id,
    // The operation deadline is the broker's limit on the remote, not the caller's: it never says timed_out. This is
    // the envelope of the call's own answer (the executor's), so unless the record says how the caller's wait ended,
    // the answer completes it; action_status and fetch_result answer the record instead (state-envelope.ts).
    caller_disposition: cancelled ? 'canceled' : (f.state.caller_disposition ?? 'completed'),
    effect: c.effect,
    outcome_basis: c.outcome_basis,
    ...envelopeError(c, f.message, f.field),
    evidence: {
      dispatch_started: f.state.dispatch_seq !== null,
      dispatch_evidence: f.state.dispatch_evidence,
      request_complete: r?.requestComplete ?? last?.request_complete ?? false,
      response_headers_received: replied,
      response_complete: replied,
      attempts: envelopeAttempts('mcp', recordedAttempts(f.state, r), c),
      journal_seq: f.state.last_seq,
      request_fingerprint: f.fingerprint ?? f.state.request_fingerprint,
      source: c.source,
      ...(f.resultId === undefined ? {} : { result_id: f.resultId, result_digest: f.resultDigest ?? '' }),
    },
  };
  return envelopeSchema.parse(envelope);
}

/**
 * The attempts as the journal recorded them (a tool call is never retried, but a closed or refused action has none
 * and a setup failure has its own). Only this run's setup failure is known by kind, so only it carries a code.
 */
function recordedAttempts(state: ActionState, report: McpEnvelopeReport | undefined): ReportedAttempt[] {
  const lastSetup = state.attempts.filter((a) => a.state === 'setup_failed').at(-1)?.n;
  return state.attempts.map((a) => {
    const dispatched = a.state === 'dispatched';
    const failure = !dispatched && a.n === lastSetup ? report?.setup?.failure : undefined;
    const connectionId = a.connection_id ?? (dispatched ? report?.connectionId : undefined);
    return {
      n: a.n,
      stage: dispatched ? 'dispatch_started' : (a.setup_stage ?? report?.setup?.stage ?? 'setup'),
      dispatched,
      ...(failure === undefined ? {} : { failure }),
      ...(connectionId === undefined ? {} : { connection_id: connectionId }),
    };
  });
}
