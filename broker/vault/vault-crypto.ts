import { randomBytes } from 'node:crypto';
import sodium from 'libsodium-wrappers-sumo';
import { CodedError } from '../contract/index.js';
import { nonceBytes } from './sealed-sizes.js';

export { nonceBytes };

/** The data key and the key-encryption key: XChaCha20-Poly1305 keys, 32 bytes. */
export const keyBytes = 32;
export const saltBytes = 16;

export type KdfStrength = 'moderate' | 'interactive' | 'min';

export interface KdfParams {
  readonly alg: 'argon2id13';
  readonly salt: Uint8Array;
  readonly opslimit: number;
  readonly memlimit: number;
}

/** libsodium must finish loading its WebAssembly before any call; every entry point awaits this. */
export async function sodiumReady(): Promise<typeof sodium> {
  await sodium.ready;
  return sodium;
}

/**
 * Argon2id limits by name. 'moderate' (~0.9 s, 256 MiB here) for real vaults; 'interactive'
 * (~0.2 s, 64 MiB); 'min' is libsodium's smallest allowed limits, still real Argon2id, for tests.
 */
export function kdfLimits(strength: KdfStrength): { opslimit: number; memlimit: number } {
  switch (strength) {
    case 'moderate':
      return { opslimit: sodium.crypto_pwhash_OPSLIMIT_MODERATE, memlimit: sodium.crypto_pwhash_MEMLIMIT_MODERATE };
    case 'interactive':
      return {
        opslimit: sodium.crypto_pwhash_OPSLIMIT_INTERACTIVE,
        memlimit: sodium.crypto_pwhash_MEMLIMIT_INTERACTIVE,
      };
    case 'min':
      return { opslimit: sodium.crypto_pwhash_OPSLIMIT_MIN, memlimit: sodium.crypto_pwhash_MEMLIMIT_MIN };
  }
}

/** Random bytes from node:crypto: libsodium's randombytes_buf costs ~54 µs a call in this build. */
export function randomNonce(): Uint8Array {
  return new Uint8Array(randomBytes(nonceBytes));
}

export function randomKey(): Uint8Array {
  return new Uint8Array(randomBytes(keyBytes));
}

export function newKdfParams(strength: KdfStrength): KdfParams {
  return { alg: 'argon2id13', salt: new Uint8Array(randomBytes(saltBytes)), ...kdfLimits(strength) };
}

/**
 * The key-encryption key from the passphrase. The stored limits are used as they are (not today's
 * defaults), but refused outside libsodium's bounds: a tampered file must not make us allocate
 * without limit or derive with trivial cost.
 */
export function deriveKek(passphrase: Uint8Array, params: KdfParams): Uint8Array {
  checkKdfParams(params);
  return sodium.crypto_pwhash(
    keyBytes,
    passphrase,
    params.salt,
    params.opslimit,
    params.memlimit,
    sodium.crypto_pwhash_ALG_ARGON2ID13,
  );
}

/** VAULT_CORRUPT for parameters outside libsodium's Argon2id bounds (shared with the worker-thread derivation). */
export function checkKdfParams(params: KdfParams): void {
  if (
    params.alg !== 'argon2id13' ||
    params.salt.length !== saltBytes ||
    params.opslimit < sodium.crypto_pwhash_OPSLIMIT_MIN ||
    params.opslimit > sodium.crypto_pwhash_OPSLIMIT_SENSITIVE ||
    params.memlimit < sodium.crypto_pwhash_MEMLIMIT_MIN ||
    params.memlimit > sodium.crypto_pwhash_MEMLIMIT_SENSITIVE
  ) {
    throw new CodedError('VAULT_CORRUPT', 'the vault key parameters are outside the allowed Argon2id bounds');
  }
}

export interface Sealed {
  readonly nonce: Uint8Array;
  readonly ciphertext: Uint8Array;
}

export function seal(key: Uint8Array, plaintext: Uint8Array, associatedData: string): Sealed {
  const nonce = randomNonce();
  const ciphertext = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, associatedData, null, nonce, key);
  return { nonce, ciphertext };
}

/** The plaintext, or undefined when authentication fails (wrong key, tampered bytes or a different AD). */
export function open(key: Uint8Array, sealed: Sealed, associatedData: string): Uint8Array | undefined {
  if (sealed.nonce.length !== nonceBytes) return undefined;
  try {
    return sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
      null,
      sealed.ciphertext,
      associatedData,
      sealed.nonce,
      key,
    );
  } catch {
    // libsodium throws a bare "ciphertext cannot be decrypted using that key": no detail to keep.
    return undefined;
  }
}

/** Overwrites key material and decrypted secrets we own before dropping them. */
export function wipe(bytes: Uint8Array | undefined): void {
  if (bytes !== undefined && bytes.length > 0) sodium.memzero(bytes);
}
