import { describe, expect, it } from 'vitest';
import { noun } from './plural.js';

describe('a count and its noun', () => {
  it('is singular for one only ("1 call", not "1 calls")', () => {
    expect([0, 1, 2].map((n) => `${n} ${noun(n, 'call')}`)).toEqual(['0 calls', '1 call', '2 calls']);
    expect(noun(1, 'entry', 'entries')).toBe('entry');
    expect(noun(3, 'entry', 'entries')).toBe('entries');
  });
});
