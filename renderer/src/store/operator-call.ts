import type { Reply } from '../../../broker/contract/index.js';
import { clientError, type ReplyError } from '../api/operator-api.js';

/**
 * The Reply a slice records when the call itself threw (the bridge or fetch broke, no Reply came back),
 * so a view shows it like any refusal: `.catch(bridgeFailed)`.
 */
export const bridgeFailed = (): { ok: false; error: ReplyError } =>
  clientError('BROKER_UNREACHABLE', 'The broker bridge failed to answer.');

/** How the last operator call made from one card or row ended, shown on it until the next. */
export type CallResult = { call: string; ok: true; message: string } | { call: string; ok: false; error: ReplyError };

/** The busy/last-result bookkeeping every decision-making view keeps per card or row. */
export interface CallBook<K extends string | number> {
  /** The call in flight per key (its name), so the buttons disable and say what is happening. */
  busy: Partial<Record<K, string>>;
  last: Partial<Record<K, CallResult>>;
}

export function emptyCallBook<K extends string | number>(): CallBook<K> {
  return { busy: {}, last: {} };
}

/** Pure: a call started on `key`; the previous result is cleared so a stale error never lingers. */
export function callStarted<K extends string | number>(book: CallBook<K>, key: K, call: string): CallBook<K> {
  const last = { ...book.last };
  delete last[key];
  return { busy: { ...book.busy, [key]: call }, last };
}

/** Pure: the call on `key` answered; `message` says what a success means for people. */
export function callFinished<K extends string | number>(
  book: CallBook<K>,
  key: K,
  call: string,
  reply: Reply<unknown>,
  message: string,
): CallBook<K> {
  const busy = { ...book.busy };
  delete busy[key];
  const result: CallResult = reply.ok ? { call, ok: true, message } : { call, ok: false, error: reply.error };
  return { busy, last: { ...book.last, [key]: result } };
}
