import path from 'node:path';
import Database from 'better-sqlite3';
import sodium from 'libsodium-wrappers-sumo';
import type { NewEvent } from '../contract/index.js';
import {
  appendLeaf,
  auditHeaderText,
  checkpointDomain,
  emptyFrontier,
  encodeAssociatedData,
  encodeCheckpointMessage,
  encodeFrontier,
  encodeLeaf,
  eventOutcomeHeader,
  frontierRoot,
  leafHash,
} from '../core/index.js';
import { encryptPayload, newRunKey, NoncePool, sealRunKey, sha256 } from '../journal/event-cipher.js';
import { sealedBodyOf } from '../journal/audit-writer.js';
import { Journal } from '../journal/index.js';
import { systemClock } from '../ports/index.js';
import { actionPaths } from './action-paths.js';

/** Rows per transaction while generating. */
const generateBatchRows = 20_000;
/** The journal's default checkpoint policy: one signed checkpoint per 1,000 events. */
export const bulkCheckpointEvery = 1_000;

/** A realistic event mix: every kind of the approved HTTP path, ~200–400 bytes of JSON each. */
const script = actionPaths.httpApproved('act_bench_000000');
function eventFor(i: number): NewEvent {
  const base = script[i % script.length] as NewEvent;
  return { ...base, action_id: `act_bench_${String(Math.floor(i / script.length)).padStart(6, '0')}` };
}

/**
 * A journal of `count` events at `dbPath` written directly in big transactions with synchronous=OFF, for the audit
 * bench and the verify-off-the-loop test: building a million events through the durable path takes minutes. It is a
 * fixture, not the journal, but the rows, tree, checkpoints and keys are exactly what the journal writes (encrypted
 * payloads under a sealed run key, leaves, the stored tree head, a signed checkpoint every 1,000 events); the audit
 * keys are fresh and their secrets are not kept, so nothing can sign after it. Returns the ms it took.
 */
export async function writeBulkAuditJournal(dbPath: string, count: number): Promise<number> {
  await sodium.ready;
  const journal = await Journal.open({ dataDir: path.dirname(dbPath), clock: systemClock });
  await journal.close();
  const db = new Database(dbPath);
  try {
    db.pragma('synchronous = OFF');
    const box = sodium.crypto_box_keypair();
    const sign = sodium.crypto_sign_keypair();
    db.prepare(
      `INSERT INTO audit_keys (id, box_public, sign_public, box_secret_wrapped, sign_secret_wrapped, created_at_ms) VALUES (1, ?, ?, x'00', x'00', 0)`,
    ).run(box.publicKey, sign.publicKey);
    const key = newRunKey();
    db.prepare(`INSERT INTO audit_runs (run, started_at_ms, sealed_key) VALUES (2, 0, ?)`).run(
      sealRunKey(key, box.publicKey),
    );
    const insert = db.prepare(
      `INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, outcome, nonce, ciphertext, leaf_hash)
        VALUES (?, ?, ?, 'ses_bench', ?, 'lane-a', ?, 2, ?, ?, ?, ?)`,
    );
    const checkpoint = db.prepare(
      `INSERT INTO checkpoints (size, root, at_ms, reason, signature) VALUES (?, ?, ?, 'interval', ?)`,
    );
    const domain = Buffer.from(checkpointDomain, 'utf8');
    const nonces = new NoncePool(4_096);
    let frontier = emptyFrontier;
    const start = performance.now();
    for (let from = 0; from < count; from += generateBatchRows) {
      db.transaction(() => {
        for (let i = from; i < Math.min(count, from + generateBatchRows); i += 1) {
          const seq = i + 1;
          const e = eventFor(i);
          const ticket = Math.floor(i / script.length) + 1;
          const header = Buffer.from(
            auditHeaderText({
              at_ms: seq,
              action_id: e.action_id,
              session_id: 'ses_bench',
              ticket,
              lane: 'lane-a',
              kind: e.kind,
              run: 2,
              outcome: eventOutcomeHeader(e),
            }),
            'utf8',
          );
          const nonce = nonces.next();
          const ct = encryptPayload(
            key,
            nonce,
            encodeAssociatedData(seq, header),
            Buffer.from(JSON.stringify(sealedBodyOf(e)), 'utf8'),
          );
          const leaf = leafHash(sha256, encodeLeaf(seq, header, nonce, ct));
          frontier = appendLeaf(sha256, frontier, leaf);
          insert.run(seq, seq, e.action_id, ticket, e.kind, eventOutcomeHeader(e), nonce, ct, leaf);
          if (seq % bulkCheckpointEvery === 0) {
            const root = frontierRoot(sha256, frontier);
            const message = encodeCheckpointMessage(domain, seq, root, seq);
            checkpoint.run(seq, root, seq, sodium.crypto_sign_detached(message, sign.privateKey));
          }
        }
      })();
    }
    db.prepare(`UPDATE audit_tree SET size = ?, frontier = ?`).run(frontier.size, encodeFrontier(frontier));
    db.pragma('wal_checkpoint(TRUNCATE)');
    return performance.now() - start;
  } finally {
    db.close();
  }
}
