import { describe, expect, it } from 'vitest';
import {
  bearerToken,
  mintAccessToken,
  mintSignInCode,
  OperatorSecrets,
  signInCodeAttemptsMax,
  tokensEqual,
} from './access-token.js';

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
  const code = '1234-5678';

  it('mints sign-in codes of 8 random digits, shown as 1234-5678', () => {
    const codes = new Set(Array.from({ length: 50 }, () => mintSignInCode()));
    expect(codes.size).toBeGreaterThan(45);
    for (const minted of codes) expect(minted).toMatch(/^\d{4}-\d{4}$/);
  });

  it('exchanges the sign-in token with its code once for a fresh session secret, and refuses it after that as used', () => {
    const secrets = new OperatorSecrets(signIn, code);
    const first = secrets.exchange(signIn, code);
    expect(first).toEqual({ ok: true, session: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(first.ok && first.session).not.toBe(signIn);
    expect(secrets.exchange(signIn, code)).toEqual({ ok: false, reason: 'used' });
    expect(secrets.exchange(`${signIn}x`, code)).toEqual({ ok: false, reason: 'wrong' });
    expect(secrets.currentToken).not.toBe(signIn);
    expect(secrets.currentCode).toMatch(/^\d{4}-\d{4}$/);
  });

  it('takes the code with or without its dash, and spaces around the digits', () => {
    expect(new OperatorSecrets(signIn, code).exchange(signIn, '12345678').ok).toBe(true);
    expect(new OperatorSecrets(signIn, code).exchange(signIn, ' 1234 5678 ').ok).toBe(true);
  });

  it('refuses the token without its code: a wrong code counts, and the last allowed one spends the URL', () => {
    const secrets = new OperatorSecrets(signIn, code);
    expect(secrets.exchange(signIn, '')).toEqual({ ok: false, reason: 'code_wrong', attemptsLeft: 2 });
    expect(secrets.exchange(signIn, '1234-5679')).toEqual({ ok: false, reason: 'code_wrong', attemptsLeft: 1 });
    expect(secrets.tokenState(signIn)).toBe('current');
    expect(secrets.exchange(signIn, '0000-0000')).toEqual({ ok: false, reason: 'code_wrong', attemptsLeft: 0 });
    expect(signInCodeAttemptsMax).toBe(3);
    // Spent: the right code no longer helps, and the next token comes with a new code.
    expect(secrets.exchange(signIn, code)).toEqual({ ok: false, reason: 'used' });
    expect(secrets.tokenState(signIn)).toBe('used');
    const next = secrets.exchange(secrets.currentToken, secrets.currentCode);
    expect(next.ok).toBe(true);
  });

  it('starts each new token with all its tries', () => {
    const secrets = new OperatorSecrets(signIn, code);
    expect(secrets.exchange(signIn, '9999-9999')).toMatchObject({ attemptsLeft: 2 });
    expect(secrets.exchange(signIn, code).ok).toBe(true);
    expect(secrets.exchange(secrets.currentToken, '9999-9999')).toMatchObject({ attemptsLeft: 2 });
  });

  it('accepts only the session secret, never the sign-in token, before or after the exchange', () => {
    const secrets = new OperatorSecrets(signIn, code);
    expect(secrets.sessionValid(signIn)).toBe(false);
    expect(secrets.sessionValid(`${signIn}\0unused`)).toBe(false);
    expect(secrets.sessionValid(undefined)).toBe(false);
    const exchanged = secrets.exchange(signIn, code);
    if (!exchanged.ok) throw new Error('the first exchange must succeed');
    expect(secrets.sessionValid(exchanged.session)).toBe(true);
    expect(secrets.sessionValid(signIn)).toBe(false);
    expect(secrets.sessionValid(`${exchanged.session}x`)).toBe(false);
  });
});
