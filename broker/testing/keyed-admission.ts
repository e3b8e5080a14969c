import type { IdempotencyKeyBinding, NewEvent } from '../contract/index.js';
import { sha256Of } from './action-paths.js';

/** How long a bound key holds in these scripts. */
export const keyRetentionMs = 60_000;

/** A key of route `docs` (scope `docs.account`, key `key-1` unless told) bound to `fingerprint` at `nowMs`. */
export function keyBinding(
  fingerprint: string,
  nowMs: number,
  o: { key?: string; route?: string; scope?: string } = {},
): IdempotencyKeyBinding {
  return {
    route: o.route ?? 'docs',
    scope: o.scope ?? 'docs.account',
    key: o.key ?? 'key-1',
    fingerprint,
    expires_at_ms: nowMs + keyRetentionMs,
  };
}

/** Admission as the executor writes it: ACTION_ACCEPTED + PREFLIGHT_VALIDATED binding the key (if any), one unit. */
export function keyedAdmission(id: string, bind: IdempotencyKeyBinding | undefined): NewEvent[] {
  return [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      lane: 'route:docs',
      payload: {
        channel: 'http',
        target: 'route:docs POST /documents/7',
        request_fingerprint: sha256Of(1),
        approval: 'none',
        idempotent: false,
      },
    },
    { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: bind === undefined ? {} : { idempotency: bind } },
  ];
}
