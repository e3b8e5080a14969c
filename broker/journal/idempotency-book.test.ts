import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BoundIdempotencyKey } from '../core/index.js';
import { IdempotencyBook, liveBindingsFromMs } from './idempotency-book.js';

const binding = (key: string, expiresAtMs: number): BoundIdempotencyKey => ({
  route: 'docs',
  scope: 'docs.account',
  key,
  fingerprint: `sha256:${'a'.repeat(64)}`,
  action_id: `act_${key}_0001`,
  first_seen_ms: 0,
  expires_at_ms: expiresAtMs,
  bound_seq: 1,
});

describe('IdempotencyBook', () => {
  it('answers the bindings it was opened with and those commits wrote, by route, scope and key', () => {
    const book = new IdempotencyBook([binding('k1', 5_000)], () => 0);
    book.committed([binding('k2', 6_000)]);
    expect(book.get('docs', 'docs.account', 'k1')?.expires_at_ms).toBe(5_000);
    expect(book.get('docs', 'docs.account', 'k2')?.expires_at_ms).toBe(6_000);
    expect(book.get('docs', 'other.account', 'k1')).toBeUndefined();
    expect(book.get('other', 'docs.account', 'k2')).toBeUndefined();
  });

  it('lets go only of bindings expired for more than the margin it keeps; a rebinding replaces the row', () => {
    let now = 100 * 3_600_000;
    const book = new IdempotencyBook([], () => now);
    book.committed([binding('long-gone', liveBindingsFromMs(now) - 1), binding('just-expired', now - 1)]);
    book.committed([binding('live', now + 1)]);
    book.sweep();
    expect(book.get('docs', 'docs.account', 'long-gone')).toBeUndefined();
    expect(book.get('docs', 'docs.account', 'just-expired')).toBeDefined();
    expect(book.size()).toBe(2);
    book.committed([binding('just-expired', now + 86_400_000)]);
    now += 25 * 3_600_000;
    book.sweep();
    expect(book.get('docs', 'docs.account', 'just-expired')?.expires_at_ms).toBe(100 * 3_600_000 + 86_400_000);
    expect(book.get('docs', 'docs.account', 'live')).toBeUndefined();
  });

  it('lets expired bindings go as commits move it, at most once a minute, without a sweep being asked for', () => {
    let now = 200 * 3_600_000;
    const book = new IdempotencyBook([binding('old', liveBindingsFromMs(now) - 1)], () => now);
    book.committed([binding('fresh', now + 3_600_000)]);
    expect(book.get('docs', 'docs.account', 'old')).toBeDefined();
    now += 61_000;
    book.committed([binding('fresher', now + 3_600_000)]);
    expect(book.get('docs', 'docs.account', 'old')).toBeUndefined();
    expect(book.size()).toBe(2);
  });

  it('property: it answers every key with the fingerprint and expiry last bound, as a map of whole rows does', () => {
    const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
    const bindingArb = fc.record({
      route: fc.constantFrom('docs', 'docs2', 'd"o'),
      scope: fc.constantFrom('a', 'a.b', ''),
      key: fc.string({ maxLength: 40 }),
      fingerprint: hex.map((h) => `sha256:${h}`),
      expires_at_ms: fc.integer({ min: 0, max: 2 ** 52 }),
    });
    fc.assert(
      fc.property(fc.array(fc.array(bindingArb, { maxLength: 5 }), { maxLength: 20 }), (commits) => {
        const book = new IdempotencyBook([], () => 0);
        const whole = new Map<string, { fingerprint: string; expires_at_ms: number }>();
        for (const written of commits) {
          book.committed(written);
          for (const b of written)
            whole.set(JSON.stringify([b.route, b.scope, b.key]), {
              fingerprint: b.fingerprint,
              expires_at_ms: b.expires_at_ms,
            });
        }
        for (const written of commits)
          for (const b of written)
            expect(book.get(b.route, b.scope, b.key)).toEqual(whole.get(JSON.stringify([b.route, b.scope, b.key])));
        expect(book.size()).toBe(whole.size);
        expect(book.get('docs', 'a', 'never-bound-\u0000')).toBeUndefined();
      }),
    );
  });

  it('keeps a row read at open whose fingerprint is not sha256:<hex> as read, neither refusing to open nor freeing the key', () => {
    const edited = { ...binding('edited', 9_000), fingerprint: 'x' };
    const book = new IdempotencyBook([edited, binding('plain', 9_000)], () => 0);
    expect(book.get('docs', 'docs.account', 'edited')).toEqual({ fingerprint: 'x', expires_at_ms: 9_000 });
    expect(book.get('docs', 'docs.account', 'plain')).toEqual({
      fingerprint: `sha256:${'a'.repeat(64)}`,
      expires_at_ms: 9_000,
    });
  });
});
