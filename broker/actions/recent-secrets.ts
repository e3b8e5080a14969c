import type { CredentialVault } from '../ports/index.js';

/**
 * The secrets a credential recently derived: OAuth2 access tokens and SigV4 `Authorization` values / signatures. The
 * scrubber of a request covers them as well as the ones this request carries, because a stateful remote can answer
 * with an EARLIER request's headers: after a 401 the cached token T1 is dropped and T2 fetched, and a remote that
 * echoes its history then hands back T1 — still valid until it expires, like a SigV4 signature within its window.
 *
 * Bounded (`recentSecretsMax` entries per credential, the oldest dropped first), in memory only and sealed by the
 * vault like the token cache (oauth-token.ts): never on disk, never in the journal or a log, dropped at lock.
 */

/** Entries (one request's derived parts each) kept per credential; each adds about one needle to every scrub. */
export const recentSecretsMax = 16;

const purposeOf = (credentialId: string): string => `recent-secrets:${credentialId}`;

export class RecentSecrets {
  private readonly byCredential = new Map<string, Uint8Array[]>();

  constructor(private readonly vault: CredentialVault) {
    vault.onLock(() => this.byCredential.clear());
  }

  /** Every part remembered for this credential (what an earlier request carried); [] when the vault cannot open them. */
  parts(credentialId: string): string[] {
    const purpose = purposeOf(credentialId);
    const parts: string[] = [];
    for (const sealed of this.byCredential.get(credentialId) ?? []) {
      try {
        parts.push(...(JSON.parse(Buffer.from(this.vault.unwrap(purpose, sealed)).toString('utf8')) as string[]));
      } catch {
        // Sealed under a key the vault no longer holds (a lock came between): nothing left to read.
        this.byCredential.delete(credentialId);
        return [];
      }
    }
    return parts;
  }

  /** Remembers one request's derived parts (nothing for a credential that derives none, or parts already kept). */
  remember(credentialId: string, derived: readonly string[]): void {
    if (derived.length === 0) return;
    const known = new Set(this.parts(credentialId));
    if (derived.every((part) => known.has(part))) return;
    const sealed = this.vault.wrap(purposeOf(credentialId), Buffer.from(JSON.stringify(derived), 'utf8'));
    const entries = [...(this.byCredential.get(credentialId) ?? []), sealed];
    this.byCredential.set(credentialId, entries.slice(-recentSecretsMax));
  }
}

const recents = new WeakMap<CredentialVault, RecentSecrets>();

/** The recent secrets of this vault's credentials (one per runtime, like the token cache). */
export function recentSecretsOf(vault: CredentialVault): RecentSecrets {
  let recent = recents.get(vault);
  if (recent === undefined) {
    recent = new RecentSecrets(vault);
    recents.set(vault, recent);
  }
  return recent;
}
