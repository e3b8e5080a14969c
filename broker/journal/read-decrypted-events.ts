import { openDatabase } from '../ports/open-database.js';
import { CodedError, type JournalEvent } from '../contract/index.js';
import { auditHeaderText, encodeAssociatedData } from '../core/index.js';
import {
  auditDecryptPurpose,
  eventOfBody,
  refusePlaintextOutsidePrefix,
  RunKeyLostError,
  type AuditVault,
} from './audit-writer.js';
import { decryptPayload, openRunKey, sodiumReady, wipe } from './event-cipher.js';
import { JournalStore, type EventRow } from './journal-store.js';

/**
 * Decrypted events in append order from `fromSeq` to `toSeq`, for `postern audit export`: a
 * read-only connection (a broker may be running), the X25519 secret unwrapped by the unlocked
 * vault, each run's key opened once. A row of a run that ended before any audit key existed stops it with that
 * run's RunKeyLostError (AUDIT_KEY_UNAVAILABLE, sealed for good); a row that fails authentication with INTERNAL
 * (verify says where and why).
 */
export async function* readDecryptedEvents(
  dbPath: string,
  vault: AuditVault,
  fromSeq: number,
  toSeq: number,
): AsyncGenerator<JournalEvent> {
  await sodiumReady();
  const db = openDatabase(dbPath, { readonly: true, fileMustExist: true });
  const runKeys = new Map<number, Uint8Array>();
  let boxSecret: Uint8Array | undefined;
  try {
    const keys = db.prepare(`SELECT box_public, box_secret_wrapped FROM audit_keys WHERE id = 1`).get() as
      { box_public: Uint8Array; box_secret_wrapped: Uint8Array } | undefined;
    if (keys !== undefined) boxSecret = vault.unwrap(auditDecryptPurpose, keys.box_secret_wrapped);
    const sealedOf = db.prepare(`SELECT sealed_key FROM audit_runs WHERE run = ?`);
    const keyOf = (run: number): Uint8Array => {
      const known = runKeys.get(run);
      if (known !== undefined) return known;
      const sealed = (sealedOf.get(run) as { sealed_key: Uint8Array | null } | undefined)?.sealed_key ?? null;
      // No audit key at all, or none sealed for this run: it ended before any existed (said as the broker says it).
      if (keys === undefined || boxSecret === undefined || sealed === null) throw new RunKeyLostError(run, 'events');
      const key = openRunKey(sealed, keys.box_public, boxSecret);
      runKeys.set(run, key);
      return key;
    };
    const plaintextThrough = new JournalStore(db).plaintextPrefixEnd();
    const rows = db
      .prepare(`SELECT * FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq`)
      .iterate(fromSeq, toSeq) as IterableIterator<EventRow>;
    for (const row of rows) {
      if (row.run === 0) refusePlaintextOutsidePrefix(row.seq, plaintextThrough);
      yield openRow(row, row.run === 0 ? undefined : keyOf(row.run));
    }
  } finally {
    wipe(boxSecret);
    for (const key of runKeys.values()) wipe(key);
    db.close();
  }
}

function openRow(row: EventRow, key: Uint8Array | undefined): JournalEvent {
  let body: Uint8Array = row.ciphertext;
  if (key !== undefined) {
    const ad = encodeAssociatedData(row.seq, Buffer.from(auditHeaderText(row), 'utf8'));
    try {
      body = decryptPayload(key, row.nonce, ad, row.ciphertext);
    } catch (cause) {
      throw new CodedError('INTERNAL', `event ${row.seq} failed authentication; run \`postern audit verify\``, {
        cause,
      });
    }
  }
  return eventOfBody(row, body);
}
