import { createHash } from 'node:crypto';

/** The form `ssh-keygen -lf` prints: `SHA256:` + base64(sha256(key blob)) without `=` padding. */
export function hostKeyFingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}
