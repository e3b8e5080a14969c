import type { CredentialInfo, CredentialVault } from '../ports/index.js';

/** A credential as an action binds it at admission (ACTION_ACCEPTED.credential): which one, which version. */
export interface BoundCredential {
  readonly id: string;
  readonly version_tag: string;
}

/**
 * The named credential as the vault describes it now — id and version tag, never the secret (metadata, readable while
 * the vault is locked) — for ACTION_ACCEPTED. Nothing when the vault holds no such credential (validation refuses it,
 * or authorization finds it missing).
 */
export function credentialBinding(vault: CredentialVault, name: string): { credential?: BoundCredential } {
  const info = vault.describe(name);
  return info === undefined ? {} : { credential: { id: info.id, version_tag: info.version_tag } };
}

/**
 * Why the credential opened right before the write is not the one the action bound (DESIGN §3: the invocation binds
 * the credential version; a mismatch is FINGERPRINT_MISMATCH, never a send), or undefined when it is, or none was bound.
 */
export function credentialChanged(bound: BoundCredential | undefined, info: CredentialInfo): string | undefined {
  if (bound === undefined) return undefined;
  if (info.id !== bound.id)
    return `the credential was replaced since this action was admitted (bound ${bound.id}, now ${info.id}); a request under the new one is a new action`;
  if (info.version_tag !== bound.version_tag)
    return `the credential was rotated since this action was admitted (bound version ${bound.version_tag}, now ${info.version_tag}); a request under the new version is a new action`;
  return undefined;
}
