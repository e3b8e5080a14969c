import { describe, expect, it } from 'vitest';
import { chooseKeyProtector, keyProtectorBackend } from './choose-key-protector.js';

describe('chooseKeyProtector', () => {
  it.each([
    ['keychain', true],
    ['dpapi', true],
    ['gnome_libsecret', true],
    ['kwallet5', true],
    ['basic_text', false],
    ['unknown', false],
    ['', false],
    ['something_new', false],
  ])('backend %j → use %s', (backend, use) => {
    expect(chooseKeyProtector(backend).use).toBe(use);
  });

  it('says why basic_text is refused: a hard-coded password', () => {
    expect(chooseKeyProtector('basic_text')).toEqual({
      use: false,
      reason: expect.stringMatching(/hard-coded password/),
    });
  });

  it('asks safeStorage for the backend only on Linux', () => {
    const ask = (): string => 'basic_text';
    expect(keyProtectorBackend('darwin', ask)).toBe('keychain');
    expect(keyProtectorBackend('win32', ask)).toBe('dpapi');
    expect(keyProtectorBackend('linux', ask)).toBe('basic_text');
    expect(keyProtectorBackend('freebsd', ask)).toBe('unknown');
  });
});
