import { classifyOutcome, type SetupFailure } from '../core/index.js';
import type { Channel, Classification, Envelope } from '../contract/index.js';

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
export function envelopeAttempts(channel: Channel, attempts: readonly ReportedAttempt[], c: Classification): Envelope['evidence']['attempts'] {
  return attempts.map((a) => ({
    n: a.n,
    stage: a.stage,
    outcome: a.dispatched ? c.outcome : ('not_attempted' as const),
    ...(a.dispatched ? (c.code === null ? {} : { code: c.code }) : a.failure === undefined ? {} : { code: setupCode(channel, a.failure) }),
    ...(a.connection_id === undefined ? {} : { connection_id: a.connection_id }),
  }));
}

function setupCode(channel: Channel, failure: SetupFailure): NonNullable<Classification['code']> {
  const c = classifyOutcome({ channel, setup: { failure, stage: '', attempts: 1, attemptsMax: 1 }, dispatchStarted: false, handedToTransport: false, requestComplete: false, idempotent: false });
  return c.code ?? 'INTERNAL';
}
