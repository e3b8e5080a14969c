import { latestCheckpoint } from '../audit/latest-checkpoint.js';
import type { Checkpoint, TrustedCheckpoint } from '../audit/checkpoint-file.js';
import { verifyJournal, type VerifyOptions, type VerifyReport } from '../audit/verify-journal.js';
import { CodedError } from '../contract/index.js';
import { signCheckpointNow, vaultCheckpointKey, type AuditVault } from '../journal/index.js';
import type { Clock } from '../ports/index.js';

/**
 * What `postern audit checkpoint --export` writes: the trust anchor `verify --checkpoint` checks a journal against
 * later, so its key must be one a process that can rewrite the journal file cannot choose. The steps:
 *
 * 1. the key is the vault's: the audit signing secret unwrapped with the passphrase, never the plaintext
 *    `audit_keys.sign_public` (an attacker who rewrote history puts its own key there and signs its own checkpoint);
 * 2. events after the newest checkpoint are signed only over a journal that verifies under that key;
 * 3. the journal verifies under that key and extends the very checkpoint the file will hold.
 *
 * Any failure throws a coded error (AUDIT_KEY_MISMATCH, AUDIT_VERIFY_FAILED, AUDIT_KEY_UNAVAILABLE, or
 * INVALID_ARGUMENT for an empty journal) before anything is written.
 */
export async function exportableCheckpoint(
  dbPath: string,
  vault: AuditVault,
  clock: Clock,
  onProgress: VerifyOptions['onProgress'],
): Promise<TrustedCheckpoint> {
  const signPublic = await vaultCheckpointKey(dbPath, vault);
  if (signPublic === undefined)
    throw new CodedError('AUDIT_KEY_UNAVAILABLE', 'no audit key exists yet: the broker creates it at the first unlock');
  const latest = latestCheckpoint(dbPath);
  let checkpoint: Checkpoint | undefined = latest.checkpoint;
  if (checkpoint === undefined || checkpoint.size < latest.treeSize) {
    // Events after the last signature: the vault's key covers them only if the log up to here is sound.
    await verifiedUnder(dbPath, { trustedKey: signPublic, onProgress });
    checkpoint = await signCheckpointNow(dbPath, vault, clock);
  }
  if (checkpoint === undefined)
    throw new CodedError('INVALID_ARGUMENT', 'the journal is empty: there is nothing to checkpoint yet', {
      field: '--data-dir',
    });
  const { size, root, at_ms, signature } = checkpoint;
  const anchor: TrustedCheckpoint = { size, root, at_ms, signature, signPublic };
  await verifiedUnder(dbPath, { trustedKey: signPublic, anchor, onProgress });
  return anchor;
}

async function verifiedUnder(dbPath: string, options: Omit<VerifyOptions, 'dbPath'>): Promise<VerifyReport> {
  const report = await verifyJournal({ dbPath, ...options });
  if (report.ok) return report;
  if (report.code === 'KEY_MISMATCH')
    throw new CodedError('AUDIT_KEY_MISMATCH', `${report.message}; no checkpoint was exported`);
  const at = report.seq === null ? '' : ` at seq ${report.seq}`;
  throw new CodedError(
    'AUDIT_VERIFY_FAILED',
    `${report.code}${at}: ${report.message}; no checkpoint was exported (\`postern audit verify\` says more)`,
  );
}
