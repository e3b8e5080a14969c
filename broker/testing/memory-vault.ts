import { randomFillSync } from 'node:crypto';
import sodium from 'libsodium-wrappers-sumo';
import { CodedError } from '../contract/index.js';
import type { CredentialVault, VaultState } from '../ports/index.js';

export type MemoryVault = Pick<CredentialVault, 'state' | 'wrap' | 'unwrap' | 'onLock' | 'onUnlock'> & {
  lock(reason?: string): void;
  unlock(): void;
};

/**
 * The vault port's wrap/unwrap and lock events with real XChaCha20-Poly1305 under a key that lives
 * in memory — for journal and audit tests that need a vault but are not about the vault. Call
 * after libsodium is ready (Journal.open awaits it; so does createMemoryVault).
 */
export async function createMemoryVault(initial: VaultState = 'unlocked', dataKey?: Uint8Array): Promise<MemoryVault> {
  await sodium.ready;
  // A given key lets two processes (the crash driver and its test) share one vault.
  const key = dataKey ?? randomFillSync(new Uint8Array(32));
  let state: VaultState = initial;
  const lockListeners = new Set<(reason: string) => void>();
  const unlockListeners = new Set<() => void>();
  const requireUnlocked = (): void => {
    if (state !== 'unlocked') throw new CodedError('VAULT_LOCKED', 'the vault is locked');
  };
  return {
    state: () => state,
    wrap(purpose, plaintext) {
      requireUnlocked();
      const nonce = randomFillSync(new Uint8Array(24));
      const sealed = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, purpose, null, nonce, key);
      const out = new Uint8Array(24 + sealed.length);
      out.set(nonce);
      out.set(sealed, 24);
      return out;
    },
    unwrap(purpose, sealed) {
      requireUnlocked();
      return sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
        null,
        sealed.subarray(24),
        purpose,
        sealed.subarray(0, 24),
        key,
      );
    },
    onLock(listener) {
      lockListeners.add(listener);
      return () => lockListeners.delete(listener);
    },
    onUnlock(listener) {
      unlockListeners.add(listener);
      return () => unlockListeners.delete(listener);
    },
    lock(reason = 'operator') {
      state = 'locked';
      for (const listener of lockListeners) listener(reason);
    },
    unlock() {
      state = 'unlocked';
      for (const listener of unlockListeners) listener();
    },
  };
}
