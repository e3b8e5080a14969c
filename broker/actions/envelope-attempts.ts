import { classifyOutcome, type SetupFailure } from '../core/index.js';
import type { ActionState, Channel, Classification, Envelope } from '../contract/index.js';

/** One attempt as a channel reports it (HTTP and SSH share this shape). */
export interface ReportedAttempt {
  readonly n: number;
  readonly stage: string;
  readonly dispatched: boolean;
  readonly failure?: SetupFailure;
  readonly connection_id?: string;
}

/**
 * The envelope's attempts list: a dispatched attempt carries the action's classification; a setup
 * attempt is not_attempted with the core's code for its own failure.
 */
export function envelopeAttempts(
  channel: Channel,
  attempts: readonly ReportedAttempt[],
  c: Classification,
): Envelope['evidence']['attempts'] {
  return attempts.map((a) => ({
    n: a.n,
    stage: a.stage,
    outcome: a.dispatched ? c.outcome : ('not_attempted' as const),
    ...(a.dispatched
      ? c.code === null
        ? {}
        : { code: c.code }
      : a.failure === undefined
        ? {}
        : { code: setupCode(channel, a.failure) }),
    ...(a.connection_id === undefined ? {} : { connection_id: a.connection_id }),
  }));
}

function setupCode(channel: Channel, failure: SetupFailure): NonNullable<Classification['code']> {
  const c = classifyOutcome({
    channel,
    setup: { failure, stage: '', attempts: 1, attemptsMax: 1 },
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
  return c.code ?? 'INTERNAL';
}

/**
 * The record's attempts before this run's first reported one (a retry run reports only its own):
 * an earlier dispatched attempt is listed as unknown unless its response completed (a refusal
 * that asked for backoff), since whatever settled the action came later; an earlier setup attempt
 * is not_attempted.
 */
export function earlierAttempts(
  state: ActionState,
  reported: readonly ReportedAttempt[],
  c: Classification,
): Envelope['evidence']['attempts'] {
  const first = reported[0]?.n ?? Number.POSITIVE_INFINITY;
  // Answered from the record alone (no run reported): its latest attempt carries the classification.
  const latest = reported.length === 0 ? state.attempts.at(-1)?.n : undefined;
  return state.attempts
    .filter((a) => a.n < first)
    .map((a) => ({
      n: a.n,
      stage: a.state === 'dispatched' ? 'dispatch_started' : (a.setup_stage ?? 'setup'),
      outcome:
        a.state !== 'dispatched'
          ? ('not_attempted' as const)
          : a.n === latest
            ? c.outcome
            : a.response_complete
              ? ('rejected' as const)
              : ('unknown' as const),
      ...(a.n === latest && a.state === 'dispatched' && c.code !== null ? { code: c.code } : {}),
      ...(a.connection_id === null ? {} : { connection_id: a.connection_id }),
    }));
}
