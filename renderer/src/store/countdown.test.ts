import { describe, expect, it } from 'vitest';
import { formatCountdown } from './countdown.js';

describe('formatCountdown', () => {
  it.each([
    [300_000, '5:00 left'],
    [299_001, '5:00 left'],
    [299_000, '4:59 left'],
    [61_000, '1:01 left'],
    [9_500, '0:10 left'],
    [1, '0:01 left'],
    [3_723_000, '1:02:03 left'],
    [0, 'expiring…'],
    [-5_000, 'expiring…'],
  ])('with %i ms left it reads %s', (leftMs, text) => {
    const now = 1_700_000_000_000;
    expect(formatCountdown(now + leftMs, now)).toBe(text);
  });
});
