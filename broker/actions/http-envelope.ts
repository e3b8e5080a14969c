import type { HttpChannelReport } from '../channels/http/index.js';
import { earlierAttempts, envelopeAttempts } from './envelope-attempts.js';
import { envelopeError } from './envelope-error.js';
import {
  envelopeSchema,
  type ActionState,
  type BatchOutcome,
  type Classification,
  type Envelope,
} from '../contract/index.js';

export interface EnvelopeFacts {
  /** The action's state after the closing event (its seq is the journal_seq the envelope cites). */
  readonly state: ActionState;
  readonly classification: Classification;
  readonly message: string;
  readonly field?: string;
  readonly report?: HttpChannelReport;
  readonly resultId?: string;
  /** The digest of the result as stored and delivered (scrubbed), never the wire digest. */
  readonly resultDigest?: string;
  readonly fingerprint?: string;
  readonly idempotency?: Envelope['evidence']['idempotency'];
  /** A declared batch's member outcomes, exactly as RESULT_COMMITTED recorded them. */
  readonly batch?: BatchOutcome;
}

/**
 * The DESIGN §3 public envelope, built only from recorded facts: the classification the journal
 * holds and the channel's observations. `error` is present whenever the classification has a code
 * (a committed 500 carries both the error and the result facts). Parsed through envelopeSchema so
 * a shape drift fails here, not in a caller.
 */
export function buildHttpEnvelope(f: EnvelopeFacts): Envelope {
  const c = f.classification;
  const r = f.report;
  // A retry run reports only its own attempts; the record holds the earlier ones.
  const attempts = [
    ...earlierAttempts(f.state, r?.attempts ?? [], c),
    ...envelopeAttempts('http', r?.attempts ?? [], c),
  ];
  const response = r?.response;
  const envelope: Envelope = {
    invocation_id: f.state.action_id,
    caller_disposition: c.code === 'CALLER_DEADLINE_EXCEEDED' ? 'timed_out' : 'completed',
    effect: c.effect,
    outcome_basis: c.outcome_basis,
    ...envelopeError(c, f.message, f.field),
    evidence: {
      dispatch_started: f.state.dispatch_seq !== null,
      dispatch_evidence: f.state.dispatch_evidence,
      request_complete: r?.requestComplete ?? false,
      response_headers_received: response !== undefined,
      response_complete: response?.framingComplete ?? false,
      attempts,
      journal_seq: f.state.last_seq,
      request_fingerprint: f.fingerprint ?? f.state.request_fingerprint,
      source: c.source,
      ...(f.idempotency === undefined ? {} : { idempotency: f.idempotency }),
      ...(response === undefined ? {} : { response_status: response.status }),
      ...(f.resultId === undefined ? {} : { result_id: f.resultId, result_digest: f.resultDigest ?? '' }),
      ...(r?.peerFingerprint === undefined ? {} : { peer_identity: r.peerFingerprint }),
      ...(f.batch === undefined ? {} : { batch: f.batch }),
    },
  };
  return envelopeSchema.parse(envelope);
}
