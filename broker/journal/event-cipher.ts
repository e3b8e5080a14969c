import { hash, randomFillSync } from 'node:crypto';
import sodium from 'libsodium-wrappers-sumo';
import type { Hash } from '../core/index.js';
import { RandomPool } from '../ports/random-pool.js';

/**
 * The journal's libsodium calls, in one file. Payloads: XChaCha20-Poly1305 (IETF) under a random
 * per-run key, 24-byte nonces from node:crypto (libsodium's randombytes_buf costs ~54 µs a call in
 * this build). Run keys: crypto_box_seal to the audit X25519 public key, so sealing needs no
 * secret. Checkpoints: Ed25519. Tree: SHA-256, as RFC 9162 specifies.
 */
export const runKeyBytes = 32;
export const nonceBytes = 24;

let ready: Promise<void> | undefined;

/** libsodium's WebAssembly must be instantiated once before any call. */
export function sodiumReady(): Promise<void> {
  ready ??= sodium.ready;
  return ready;
}

/** One-shot crypto.hash: ~2 µs a call here, against ~5 µs for createHash().update().digest(). */
export const sha256: Hash = (data) => hash('sha256', data, 'buffer');

/** Nonces are drawn a pool at a time: one call into the CSPRNG per pool, not per event. */
export class NoncePool {
  private readonly random: RandomPool;

  constructor(poolNonces = 256) {
    this.random = new RandomPool(poolNonces * nonceBytes);
  }

  next(): Uint8Array {
    return this.random.take(nonceBytes);
  }
}

export function newRunKey(): Uint8Array {
  return randomFillSync(new Uint8Array(runKeyBytes));
}

export function encryptPayload(key: Uint8Array, nonce: Uint8Array, ad: Uint8Array, plaintext: Uint8Array): Uint8Array {
  return sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, ad, null, nonce, key);
}

/** Throws when the ciphertext, nonce or associated data were changed (or the key is wrong). */
export function decryptPayload(key: Uint8Array, nonce: Uint8Array, ad: Uint8Array, ciphertext: Uint8Array): Uint8Array {
  return sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ciphertext, ad, nonce, key);
}

export function sealRunKey(runKey: Uint8Array, boxPublic: Uint8Array): Uint8Array {
  return sodium.crypto_box_seal(runKey, boxPublic);
}

export function openRunKey(sealed: Uint8Array, boxPublic: Uint8Array, boxSecret: Uint8Array): Uint8Array {
  return sodium.crypto_box_seal_open(sealed, boxPublic, boxSecret);
}

export interface AuditKeyPairs {
  readonly boxPublic: Uint8Array;
  readonly boxSecret: Uint8Array;
  readonly signPublic: Uint8Array;
  readonly signSecret: Uint8Array;
}

export function newAuditKeyPairs(): AuditKeyPairs {
  const box = sodium.crypto_box_keypair();
  const sign = sodium.crypto_sign_keypair();
  return {
    boxPublic: box.publicKey,
    boxSecret: box.privateKey,
    signPublic: sign.publicKey,
    signSecret: sign.privateKey,
  };
}

export function signDetached(message: Uint8Array, signSecret: Uint8Array): Uint8Array {
  return sodium.crypto_sign_detached(message, signSecret);
}

/**
 * The Ed25519 public key of a signing secret, derived from its seed (not copied from the secret's
 * second half), so it is the key the secret actually signs for.
 */
export function signPublicOf(signSecret: Uint8Array): Uint8Array {
  const seed = sodium.crypto_sign_ed25519_sk_to_seed(signSecret);
  const pair = sodium.crypto_sign_seed_keypair(seed);
  wipe(seed);
  wipe(pair.privateKey);
  return pair.publicKey;
}

/** Best effort: a JavaScript engine may have copied the bytes; this only shortens their life. */
export function wipe(bytes: Uint8Array | undefined): void {
  bytes?.fill(0);
}
