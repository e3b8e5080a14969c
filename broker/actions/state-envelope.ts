import { envelopeError } from './envelope-error.js';
import {
  envelopeSchema,
  errorCodeMeanings,
  type ActionState,
  type CallerDisposition,
  type Classification,
  type Envelope,
  type Phase,
} from '../contract/index.js';

/**
 * The public envelope of an action as its journaled state says it is now: for action_status, a
 * caller that stopped waiting, and closures the queue recorded (rejected, expired, cancelled).
 * Built only from recorded facts; an action nothing has classified yet carries no error and a null
 * effect (it is still waiting or in flight). `caller_disposition` is the one `disposition` names (this answer is
 * the caller's own, and says how its call ended), else the recorded one — null when none is recorded (a call cut
 * off unanswered by a crash or a stop, or one still waiting): `completed` comes only from RESULT_DELIVERED or from
 * an answer that completes its own call, never as a default.
 */
export function stateEnvelope(state: ActionState, disposition?: CallerDisposition): Envelope {
  const c = stateClassification(state);
  const last = state.attempts.at(-1);
  const envelope: Envelope = {
    invocation_id: state.action_id,
    caller_disposition: disposition ?? state.caller_disposition,
    effect: state.effect,
    outcome_basis: state.outcome_basis,
    ...(c === undefined || c.code === null ? {} : envelopeError(c, errorCodeMeanings[c.code])),
    evidence: {
      dispatch_started: state.dispatch_seq !== null,
      dispatch_evidence: state.dispatch_evidence,
      request_complete: last?.request_complete ?? false,
      response_headers_received: last?.response_started ?? false,
      response_complete: last?.response_complete ?? false,
      attempts: state.attempts.map((a) => ({
        n: a.n,
        stage: a.state === 'dispatched' ? 'dispatch_started' : (a.setup_stage ?? 'setup'),
        outcome: a.state === 'dispatched' ? (state.outcome ?? 'unknown') : ('not_attempted' as const),
        ...(a.connection_id === null ? {} : { connection_id: a.connection_id }),
      })),
      journal_seq: state.last_seq,
      request_fingerprint: state.request_fingerprint,
      ...(state.source === null ? {} : { source: state.source }),
      ...(last?.response_status === null || last === undefined || state.channel !== 'http'
        ? {}
        : { response_status: last.response_status }),
      ...(last?.exit_status === null || last === undefined ? {} : { exit_status: last.exit_status }),
      ...(last?.exit_signal === null || last === undefined ? {} : { exit_signal: last.exit_signal }),
      ...(state.result_id === null ? {} : { result_id: state.result_id, result_digest: state.result_digest ?? '' }),
    },
  };
  return envelopeSchema.parse(envelope);
}

/** The recorded classification, or undefined while nothing has classified the action. */
export function stateClassification(state: ActionState): Classification | undefined {
  if (
    state.outcome === null ||
    state.phase === null ||
    state.retry === null ||
    state.effect === null ||
    state.outcome_basis === null ||
    state.source === null
  )
    return undefined;
  return {
    phase: state.phase,
    outcome: state.outcome,
    retry: state.retry,
    code: state.code,
    effect: state.effect,
    outcome_basis: state.outcome_basis,
    source: state.source,
    ...(state.retry_after_ms === null ? {} : { retry_after_ms: state.retry_after_ms }),
  };
}

/**
 * The caller stopped after dispatch (its wait passed, or it cancelled) and no outcome is recorded yet (DESIGN §3): the
 * cause is the caller event, the outcome unknown until a recorded remote result exists, and the safe retry is reading
 * that result — never a resend. Undefined when the action was not dispatched or its outcome is recorded: then the
 * record answers as it is.
 */
export function stoppedAfterDispatch(
  state: ActionState,
  disposition: CallerDisposition,
  code: 'CALLER_DEADLINE_EXCEEDED' | 'CALLER_CANCELLED',
  message: string,
): Envelope | undefined {
  if (state.dispatch_seq === null || (state.outcome !== null && state.recorded)) return undefined;
  const envelope = stateEnvelope(state, disposition);
  return {
    ...envelope,
    effect: envelope.effect ?? 'unknown_effect',
    error: { code, phase: 'remote_execution', outcome: 'unknown', retry: 'fetch_result', message },
  };
}

/**
 * fetch_result on an action nothing has classified yet — still waiting (its turn, a person, a session approval) or
 * dispatched with no recorded outcome: RESULT_NOT_READY, retry fetch_result, carrying only what is known so far —
 * not_attempted before DISPATCH_STARTED, unknown after it, never more — and how to wait (action_status wait_ms).
 * Undefined once a classification is recorded: then the record answers.
 */
export function resultNotReady(state: ActionState): Envelope | undefined {
  if (stateClassification(state) !== undefined) return undefined;
  const envelope = stateEnvelope(state);
  const wait = `wait with action_status {"action_id":"${state.action_id}","wait_ms":…} (below your client's request timeout), then call fetch_result again`;
  if (state.dispatch_seq !== null) {
    return {
      ...envelope,
      effect: envelope.effect ?? 'unknown_effect',
      error: {
        code: 'RESULT_NOT_READY',
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'fetch_result',
        message: `no result yet: the action was dispatched and no outcome is recorded; its effect is unknown until one is: ${wait}; never send it again`,
      },
    };
  }
  return {
    ...envelope,
    error: {
      code: 'RESULT_NOT_READY',
      phase: phaseBeforeDispatch(state),
      outcome: 'not_attempted',
      retry: 'fetch_result',
      message: `no result yet: the action has not been dispatched, nothing was sent so far: ${wait}`,
    },
  };
}

/** Where an undispatched, unclassified action stands: admitted, waiting for its turn or a person, or in setup. */
function phaseBeforeDispatch(state: ActionState): Phase {
  if (state.stage === 'accepted') return 'validation';
  if (state.stage === 'credential_authorized' || state.attempts.length > 0) return 'connection_setup';
  return 'credential_injection';
}
