import { describe, expect, it } from 'vitest';
import { bearerToken, mintAccessToken, parseCookies, tokensEqual } from './access-token.js';

describe('access tokens', () => {
  it('mints 32 random bytes as base64url, different every time', () => {
    const tokens = new Set(Array.from({ length: 50 }, () => mintAccessToken()));
    expect(tokens.size).toBe(50);
    for (const token of tokens) {
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    }
  });

  it.each([
    ['the same token', 'abc', 'abc', true],
    ['a different token of the same length', 'abc', 'abd', false],
    ['a prefix', 'abcdef', 'abc', false],
    ['an empty guess', 'abc', '', false],
  ])('compares %s', (_when, expected, presented, equal) => {
    expect(tokensEqual(expected, presented)).toBe(equal);
  });

  it('parses cookies, keeping the first of a repeated name', () => {
    const cookies = parseCookies('a=1; postern_session_80=tok; junk; a=2; =x');
    expect(cookies.get('a')).toBe('1');
    expect(cookies.get('postern_session_80')).toBe('tok');
    expect(cookies.size).toBe(2);
    expect(parseCookies(undefined).size).toBe(0);
  });

  it.each([
    ['Bearer abc', 'abc'],
    ['bearer   abc ', 'abc'],
    ['Basic abc', undefined],
    ['Bearer', undefined],
    ['Bearer a b', undefined],
    [undefined, undefined],
  ])('reads the bearer token from %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });
});
