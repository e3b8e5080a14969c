import { CodedError, isoTime, type IdempotencyKeyBinding } from '../contract/index.js';

/**
 * One row of the idempotency-key table: which fingerprint a key means on a route and scope, who
 * bound it, and until when the remote is known to remember it. A projection of the log: each row
 * comes from the PREFLIGHT_VALIDATED event that bound it (`bound_seq`).
 */
export interface BoundIdempotencyKey {
  readonly route: string;
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly action_id: string;
  readonly first_seen_ms: number;
  readonly expires_at_ms: number;
  readonly bound_seq: number;
}

/** What deciding a claim needs of the key's current binding: the request it means and until when. */
export type KeyBinding = Pick<BoundIdempotencyKey, 'fingerprint' | 'expires_at_ms'>;

/** The event that asks to bind a key: its claim and where it lands in the log. */
export interface IdempotencyClaim {
  readonly binding: IdempotencyKeyBinding;
  readonly action_id: string;
  readonly seq: number;
  readonly at_ms: number;
}

/** The binding after the claim: a new row to write, or the existing row unchanged (a same-key retry). */
export type BindDecision =
  { readonly kind: 'bound'; readonly row: BoundIdempotencyKey } | { readonly kind: 'same'; readonly row: KeyBinding };

/**
 * DESIGN §3 "Idempotency is a remote contract": a key reused (same route and scope) with another
 * fingerprint is IDEMPOTENCY_MISMATCH locally — the remote would either refuse it or, worse, answer
 * with the first request's result for a different request. The same fingerprint is a same-key
 * retry and keeps the first row: the remote's retention runs from the first time it saw the key,
 * so a retry never extends the window. Past `expires_at_ms` the remote has forgotten the key and
 * it is free again. Decided on the event's own wall time, so a replay of the log decides the same.
 * Pure; throws the refusal as a CodedError with `field` so the journal refuses only this unit.
 */
export function bindIdempotencyKey(existing: KeyBinding | undefined, claim: IdempotencyClaim): BindDecision {
  const { binding } = claim;
  if (existing !== undefined && existing.expires_at_ms > claim.at_ms) {
    if (existing.fingerprint === binding.fingerprint) return { kind: 'same', row: existing };
    throw new CodedError(
      'IDEMPOTENCY_MISMATCH',
      `idempotency key is bound to another request fingerprint on this route and scope until ${isoTime(existing.expires_at_ms)}`,
      {
        field: 'idempotency_key',
      },
    );
  }
  return {
    kind: 'bound',
    row: {
      route: binding.route,
      scope: binding.scope,
      key: binding.key,
      fingerprint: binding.fingerprint,
      action_id: claim.action_id,
      first_seen_ms: claim.at_ms,
      expires_at_ms: binding.expires_at_ms,
      bound_seq: claim.seq,
    },
  };
}

/** The table's primary key as one map key (JSON: no separator a route, scope or key could forge). */
export function idempotencyKeyId(route: string, scope: string, key: string): string {
  return JSON.stringify([route, scope, key]);
}
