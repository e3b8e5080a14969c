import type { SshChannelReport } from '../channels/ssh/index.js';
import { envelopeAttempts } from './envelope-attempts.js';
import { envelopeError } from './envelope-error.js';
import { envelopeSchema, type ActionState, type Classification, type Envelope } from '../contract/index.js';

export interface SshEnvelopeFacts {
  /** The action's state after the closing event (its seq is the journal_seq the envelope cites). */
  readonly state: ActionState;
  readonly classification: Classification;
  readonly message: string;
  readonly field?: string;
  readonly report?: SshChannelReport;
  readonly resultId?: string;
  readonly fingerprint?: string;
}

/**
 * The DESIGN §3 public envelope for an SSH action, from recorded facts only. For SSH,
 * `response_headers_received` means the exec reply arrived (success or failure) and
 * `response_complete` means exit status/signal, EOF and channel close were all seen.
 */
export function buildSshEnvelope(f: SshEnvelopeFacts): Envelope {
  const c = f.classification;
  const r = f.report;
  const attempts = envelopeAttempts('ssh', r?.attempts ?? [], c);
  // The operation deadline is the broker's limit on the remote, not the caller's: it never says timed_out.
  const cancelled = r?.caller === 'cancelled' || r?.stoppedBeforeDispatch === 'cancelled';
  const envelope: Envelope = {
    invocation_id: f.state.action_id,
    caller_disposition: cancelled ? 'canceled' : 'completed',
    effect: c.effect,
    outcome_basis: c.outcome_basis,
    ...envelopeError(c, f.message, f.field),
    evidence: {
      dispatch_started: f.state.dispatch_seq !== null,
      dispatch_evidence: f.state.dispatch_evidence,
      request_complete: r?.requestComplete ?? false,
      response_headers_received: r?.execReply !== undefined,
      response_complete:
        r !== undefined && (r.exitStatus !== undefined || r.exitSignal !== undefined) && r.outputComplete,
      attempts,
      journal_seq: f.state.last_seq,
      request_fingerprint: f.fingerprint ?? f.state.request_fingerprint,
      source: c.source,
      ...(r?.exitStatus === undefined ? {} : { exit_status: r.exitStatus }),
      ...(r?.exitSignal === undefined ? {} : { exit_signal: r.exitSignal }),
      ...(f.resultId === undefined || r === undefined ? {} : { result_id: f.resultId, result_digest: r.output.digest }),
      ...(r?.hostKey === undefined ? {} : { peer_identity: r.hostKey.fingerprint }),
    },
  };
  return envelopeSchema.parse(envelope);
}
