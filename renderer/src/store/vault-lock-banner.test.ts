import { describe, expect, it } from 'vitest';
import { vaultLockBanner, vaultNextStep } from './vault-lock-banner.js';

describe('vaultLockBanner', () => {
  it('names the idle time when the vault locked itself', () => {
    expect(vaultLockBanner({ state: 'locked', auto_lock_minutes: 15, last_lock: { at_ms: 1, reason: 'idle' } })).toBe(
      'Vault locked (idle 15 min)',
    );
  });

  it('says an operator locked it', () => {
    expect(
      vaultLockBanner({ state: 'locked', auto_lock_minutes: 0, last_lock: { at_ms: 1, reason: 'operator' } }),
    ).toBe('Vault locked (locked by an operator)');
  });

  it('shows nothing once unlocked again, or when no lock happened in this run', () => {
    expect(
      vaultLockBanner({ state: 'unlocked', auto_lock_minutes: 15, last_lock: { at_ms: 1, reason: 'idle' } }),
    ).toBeNull();
    expect(vaultLockBanner({ state: 'locked', auto_lock_minutes: 15, last_lock: null })).toBeNull();
  });
});

describe('vaultNextStep', () => {
  it('says to create a vault while there is none, with the command for this data directory', () => {
    expect(vaultNextStep({ state: 'uninitialized' }, '/home/ann/.postern')).toEqual({
      state: 'uninitialized',
      headline: 'No vault yet: no credential can be injected',
      step: 'Create a vault',
      command: 'postern vault init --data-dir /home/ann/.postern',
      // The guided first run creates it in the page; the command is for a terminal.
      href: '#/welcome',
    });
    expect(vaultNextStep({ state: 'uninitialized' }, "/tmp/it's here")?.command).toBe(
      `postern vault init --data-dir '/tmp/it'\\''s here'`,
    );
    expect(vaultNextStep({ state: 'uninitialized' })?.command).toBe('postern vault init');
  });

  it('says to unlock a locked vault, naming why when this broker locked it', () => {
    expect(
      vaultNextStep({ state: 'locked', auto_lock_minutes: 15, last_lock: { at_ms: 1, reason: 'idle' } }),
    ).toMatchObject({
      headline: 'Vault locked (idle 15 min)',
      step: 'Unlock',
      command: null,
    });
    expect(vaultNextStep({ state: 'locked' })).toMatchObject({ headline: 'Vault locked', step: 'Unlock' });
    expect(vaultNextStep({ state: 'locked', auto_lock_minutes: 15, last_lock: null })).toMatchObject({
      headline: 'Vault locked',
      step: 'Unlock',
    });
  });

  it('has no step while unlocked', () => {
    expect(vaultNextStep({ state: 'unlocked' })).toBeNull();
  });
});
