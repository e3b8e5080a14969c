/**
 * An XChaCha20-Poly1305 nonce, 24 bytes: apart from vault-crypto.ts so the store (which checks a stored nonce's length)
 * loads without libsodium, as `postern vault list` reads the file (vault-listing.ts).
 */
export const nonceBytes = 24;
