import { describe, expect, it } from 'vitest';
import { RandomPool } from './random-pool.js';

describe('when the random pool hands out bytes', () => {
  it('never hands out the same bytes twice, across refills', () => {
    const pool = new RandomPool(64);
    const taken = Array.from({ length: 200 }, () => pool.take(10));
    const seen = new Set(taken.map((b) => b.toString('hex')));
    expect(seen.size).toBe(200);
  });

  it('keeps a slice handed out earlier intact after the pool refills', () => {
    const pool = new RandomPool(32);
    const first = pool.take(24);
    const copy = Buffer.from(first);
    for (let i = 0; i < 10; i += 1) pool.take(24);
    expect(first.equals(copy)).toBe(true);
  });

  it('serves a request larger than the pool from its own buffer', () => {
    const pool = new RandomPool(16);
    const big = pool.take(40);
    expect(big.length).toBe(40);
    expect(big.equals(Buffer.alloc(40))).toBe(false);
  });
});
