import { describe, expect, it } from 'vitest';
import { bearerToken, mintAccessToken, OperatorSecrets, tokensEqual } from './access-token.js';

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

describe('the operator secrets of one run', () => {
  const signIn = 'SIGN-IN-CANARY-0000000000000000000000000000';

  it('exchanges the sign-in token once for a fresh session secret, and refuses it after that as used', () => {
    const secrets = new OperatorSecrets(signIn);
    const first = secrets.exchange(signIn);
    expect(first).toEqual({ ok: true, session: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(first.ok && first.session).not.toBe(signIn);
    expect(secrets.exchange(signIn)).toEqual({ ok: false, reason: 'used' });
    expect(secrets.exchange(`${signIn}x`)).toEqual({ ok: false, reason: 'wrong' });
  });

  it('accepts only the session secret, never the sign-in token, before or after the exchange', () => {
    const secrets = new OperatorSecrets(signIn);
    expect(secrets.sessionValid(signIn)).toBe(false);
    expect(secrets.sessionValid(`${signIn}\0unused`)).toBe(false);
    expect(secrets.sessionValid(undefined)).toBe(false);
    const exchanged = secrets.exchange(signIn);
    if (!exchanged.ok) throw new Error('the first exchange must succeed');
    expect(secrets.sessionValid(exchanged.session)).toBe(true);
    expect(secrets.sessionValid(signIn)).toBe(false);
    expect(secrets.sessionValid(`${exchanged.session}x`)).toBe(false);
  });
});
