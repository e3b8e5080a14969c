import type { ApprovalCard } from '../../../broker/contract/index.js';

/**
 * Whether a blocked head's card offers "Retry with the same key", decided from the card and the renderer's clock
 * (`nowMs`, the view's ticking clock: the same machine as the broker). retry_possible is the journal's rule for a
 * retry lease and a kept request to resend; retry_until_ms is the end of the idempotency key's window, after which
 * the journal refuses a same-key retry. Pure. The journal's check at click time stays the authority: a click it
 * refuses is shown on the card with its code, nothing sent.
 */
export type RetryOffer = { offered: true; text: string } | { offered: false; why: string };

export function retryOffer(card: ApprovalCard, nowMs: number): RetryOffer {
  if (!card.retry_possible) return { offered: false, why: noRetryWhy(card) };
  const until = card.retry_until_ms;
  if (until === null)
    return {
      offered: true,
      text: 'Retry with the same key possible while its key’s window lasts (checked on the click).',
    };
  if (nowMs >= until)
    return {
      offered: false,
      why: `No retry: the idempotency key’s window for #${card.ticket} passed at ${clockTime(until, nowMs)}, so the broker would refuse a retry with the same key (nothing would be sent). Reconcile, attest or abandon it.`,
    };
  return { offered: true, text: `Retry with the same key possible until ${clockTime(until, nowMs)}.` };
}

/**
 * Why no retry is offered: the card's retry_possible is the journal's own rule for a retry lease (retriableRecord) and
 * a kept request to resend (an HTTP call under a bound key), so the button is shown only when a click could be taken.
 */
export function noRetryWhy(card: ApprovalCard): string {
  if (!card.dispatch_recorded)
    return `No retry: no dispatch of #${card.ticket} is recorded, yet it may have been sent (the journal was quarantined and may lack that record), so a retry could send it twice. Attest or abandon it (Reconcile once the journal is re-adopted).`;
  return `No retry: a person can resend only an HTTP request kept under its idempotency key, and #${card.ticket} has none. Reconcile, attest or abandon it.`;
}

/**
 * A moment as local 24-hour "14:32", with its date ("2026-12-04 14:32") when it is not on today's date. Cut to the
 * minute, never rounded up: "until 14:32" is never later than the window's end.
 */
export function clockTime(ms: number, nowMs: number): string {
  const at = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  const hm = `${two(at.getHours())}:${two(at.getMinutes())}`;
  const now = new Date(nowMs);
  const sameDay =
    at.getFullYear() === now.getFullYear() && at.getMonth() === now.getMonth() && at.getDate() === now.getDate();
  return sameDay ? hm : `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${hm}`;
}
