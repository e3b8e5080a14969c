import { openDatabase } from '../ports/open-database.js';
import { auditSignPurpose, type AuditVault } from './audit-writer.js';
import { signPublicOf, sodiumReady, wipe } from './event-cipher.js';

/**
 * The checkpoint public key as the vault knows it: the audit signing secret unwrapped by the unlocked
 * vault (only the passphrase opens it; a rewritten wrap fails with VAULT_CORRUPT), its public half
 * derived. `audit_keys.sign_public` is plaintext that any process running as the user can replace
 * (THREAT-MODEL), so a checkpoint export and `audit verify --check-key` trust this key, never that
 * column. Read-only (a broker may be running); undefined when no audit key exists yet.
 */
export async function vaultCheckpointKey(
  dbPath: string,
  vault: Pick<AuditVault, 'unwrap'>,
): Promise<Uint8Array | undefined> {
  await sodiumReady();
  const db = openDatabase(dbPath, { readonly: true, fileMustExist: true });
  let signSecret: Uint8Array | undefined;
  try {
    const row = db.prepare(`SELECT sign_secret_wrapped FROM audit_keys WHERE id = 1`).get() as
      { sign_secret_wrapped: Uint8Array } | undefined;
    if (row === undefined) return undefined;
    signSecret = vault.unwrap(auditSignPurpose, row.sign_secret_wrapped);
    return signPublicOf(signSecret);
  } finally {
    wipe(signSecret);
    db.close();
  }
}
