import { describe, expect, it } from 'vitest';
import { vaultLockBanner } from './vault-lock-banner.js';

describe('vaultLockBanner', () => {
  it('names the idle time when the vault locked itself', () => {
    expect(vaultLockBanner({ state: 'locked', auto_lock_minutes: 15, last_lock: { at_ms: 1, reason: 'idle' } })).toBe('Vault locked (idle 15 min)');
  });

  it('says an operator locked it', () => {
    expect(vaultLockBanner({ state: 'locked', auto_lock_minutes: 0, last_lock: { at_ms: 1, reason: 'operator' } })).toBe('Vault locked (locked by an operator)');
  });

  it('shows nothing once unlocked again, or when no lock happened in this run', () => {
    expect(vaultLockBanner({ state: 'unlocked', auto_lock_minutes: 15, last_lock: { at_ms: 1, reason: 'idle' } })).toBeNull();
    expect(vaultLockBanner({ state: 'locked', auto_lock_minutes: 15, last_lock: null })).toBeNull();
  });
});
