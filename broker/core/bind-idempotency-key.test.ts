import { describe, expect, it } from 'vitest';
import type { IdempotencyKeyBinding } from '../contract/index.js';
import { bindIdempotencyKey, idempotencyKeyId, type BoundIdempotencyKey } from './bind-idempotency-key.js';

const fpA = `sha256:${'a'.repeat(64)}`;
const fpB = `sha256:${'b'.repeat(64)}`;
const claimOf = (
  fingerprint: string,
  atMs: number,
  expiresAtMs = atMs + 1_000,
): { binding: IdempotencyKeyBinding; action_id: string; seq: number; at_ms: number } => ({
  binding: { route: 'docs', scope: 'docs.account', key: 'key-1', fingerprint, expires_at_ms: expiresAtMs },
  action_id: `act_claim_${atMs}`,
  seq: atMs,
  at_ms: atMs,
});
const bound: BoundIdempotencyKey = {
  route: 'docs',
  scope: 'docs.account',
  key: 'key-1',
  fingerprint: fpA,
  action_id: 'act_first_1',
  first_seen_ms: 100,
  expires_at_ms: 1_100,
  bound_seq: 3,
};

describe('binding an idempotency key', () => {
  it('a key never seen is bound to the claim: fingerprint, action, first seen, earliest safe expiry, the event that bound it', () => {
    expect(bindIdempotencyKey(undefined, claimOf(fpA, 100))).toEqual({
      kind: 'bound',
      row: {
        route: 'docs',
        scope: 'docs.account',
        key: 'key-1',
        fingerprint: fpA,
        action_id: 'act_claim_100',
        first_seen_ms: 100,
        expires_at_ms: 1_100,
        bound_seq: 100,
      },
    });
  });

  it('the same key with the same fingerprint is a same-key retry: allowed, and the first binding (and its window) stays', () => {
    expect(bindIdempotencyKey(bound, claimOf(fpA, 900, 5_000))).toEqual({ kind: 'same', row: bound });
  });

  it('the same key with another fingerprint inside the window is IDEMPOTENCY_MISMATCH on field idempotency_key', () => {
    expect(() => bindIdempotencyKey(bound, claimOf(fpB, 1_099))).toThrow(
      expect.objectContaining({
        code: 'IDEMPOTENCY_MISMATCH',
        field: 'idempotency_key',
        message:
          'idempotency key is bound to another request fingerprint on this route and scope until 1970-01-01T00:00:01.100Z',
      }),
    );
  });

  it('from expires_at_ms on the remote has forgotten the key: another fingerprint binds it anew', () => {
    const decision = bindIdempotencyKey(bound, claimOf(fpB, 1_100));
    expect(decision).toMatchObject({
      kind: 'bound',
      row: { fingerprint: fpB, first_seen_ms: 1_100, action_id: 'act_claim_1100' },
    });
  });

  it('map keys cannot be forged by a separator inside a route, scope or key', () => {
    expect(idempotencyKeyId('a', 'b|c', 'd')).not.toBe(idempotencyKeyId('a', 'b', 'c|d'));
    expect(idempotencyKeyId('a', 'b","c', 'd')).not.toBe(idempotencyKeyId('a', 'b', 'c","d'));
  });
});
