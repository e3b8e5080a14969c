import type { RetryDisposition } from '../contract/index.js';

/**
 * What the caller opted into. Nothing is retried unless this is given, and then only what the
 * broker itself marked safe: `backoff` (send again later; honours retry_after_ms) and
 * `same_idempotency_key` (send again with the same key — only for a call that carried one). Every
 * other disposition (`reconcile`, `fetch_result`, `after_correction`, `never`) is returned to the
 * caller as thrown, because retrying it could repeat an effect or can never succeed.
 */
export interface RetryOptions {
  /** Total attempts, the first included (1 = no retry). */
  readonly attemptsMax: number;
  readonly backoff?: boolean;
  readonly sameIdempotencyKey?: boolean;
  /** First delay when the broker gives no retry_after_ms; doubled each attempt. Default 250 ms. */
  readonly delayMs?: number;
  /** Ceiling for any one delay, retry_after_ms included. Default 30 s. */
  readonly delayMsMax?: number;
}

export const retryDelayMsDefault = 250;
export const retryDelayMsMaxDefault = 30_000;
/** A hard ceiling whatever the caller asks: retries are for transient refusals, not loops. */
export const retryAttemptsCeiling = 20;

export type RetryStep = { retry: false } | { retry: true; delayMs: number };

/** Pure: whether attempt `attempt` (1-based, just failed) is followed by another, and after how long. */
export function nextRetry(input: {
  options: RetryOptions | undefined;
  attempt: number;
  disposition: RetryDisposition | undefined;
  retryAfterMs: number | undefined;
  hasIdempotencyKey: boolean;
}): RetryStep {
  const { options, attempt, disposition } = input;
  if (options === undefined || disposition === undefined) return { retry: false };
  const attemptsMax = Math.min(Math.max(1, Math.floor(options.attemptsMax)), retryAttemptsCeiling);
  if (attempt >= attemptsMax) return { retry: false };
  const allowed =
    (disposition === 'backoff' && options.backoff === true) ||
    (disposition === 'same_idempotency_key' && options.sameIdempotencyKey === true && input.hasIdempotencyKey);
  if (!allowed) return { retry: false };
  const ceiling = options.delayMsMax ?? retryDelayMsMaxDefault;
  // The broker's retry_after_ms (from the remote's Retry-After) wins over our own doubling.
  const wanted = input.retryAfterMs ?? (options.delayMs ?? retryDelayMsDefault) * 2 ** (attempt - 1);
  return { retry: true, delayMs: Math.min(ceiling, wanted) };
}
