import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import {
  appendLeaf,
  auditHeaderText,
  type AuditHeaderFields,
  emptyFrontier,
  encodeFrontier,
  encodeLeaf,
  leafHash,
} from '../core/index.js';
import { sha256 } from '../journal/event-cipher.js';
import { actionPaths } from '../testing/action-paths.js';
import { createTempDir } from '../testing/temp-dir.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { verifyJournal } from './verify-journal.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function journalOf(count: number): Promise<TempJournal> {
  const t = await openTempJournal({ checkpointEveryEvents: 1_000 });
  cleanup.push(() => t.dispose());
  const events = actionPaths.httpApproved('act_worker_0001').slice(0, count) as NewEvent[];
  for (const event of events) await t.journal.append(event);
  await t.journal.close();
  return t;
}

/**
 * Rewrites rows' text cells and re-chains the log with core's auditHeaderText and encodeLeaf, as
 * the journal would have written those values (no checkpoints, so the rows alone decide).
 */
function rewritten(t: TempJournal, cells: ReadonlyArray<Record<string, string | null>>): string {
  const dir = createTempDir('postern-verify-worker-');
  cleanup.push(() => dir.remove());
  const path = join(dir.path, 'journal.sqlite');
  copyFileSync(t.path, path);
  const db = new Database(path);
  try {
    db.exec(`DROP TRIGGER events_no_update; DROP TRIGGER checkpoints_no_delete; DELETE FROM checkpoints;`);
    const rows = db.prepare(`SELECT * FROM events ORDER BY seq`).all() as Array<Record<string, unknown>>;
    const update = db.prepare(
      `UPDATE events SET action_id = @action_id, session_id = @session_id, lane = @lane, kind = @kind, outcome = @outcome,
        leaf_hash = @leaf_hash WHERE seq = @seq`,
    );
    let frontier = emptyFrontier;
    for (const [i, stored] of rows.entries()) {
      const row = { ...stored, ...cells[i % cells.length] } as Record<string, unknown>;
      update.run({ ...row, leaf_hash: Buffer.alloc(32) });
      // Read back: SQLite stores what it stores (a lone surrogate becomes U+FFFD); the leaf is of that.
      const back = db.prepare(`SELECT * FROM events WHERE seq = ?`).get(row['seq']) as AuditHeaderFields & {
        seq: number;
        nonce: Buffer;
        ciphertext: Buffer;
      };
      const header = Buffer.from(auditHeaderText(back), 'utf8');
      const leaf = leafHash(sha256, encodeLeaf(back.seq, header, back.nonce, back.ciphertext));
      db.prepare(`UPDATE events SET leaf_hash = ? WHERE seq = ?`).run(leaf, back.seq);
      frontier = appendLeaf(sha256, frontier, leaf);
    }
    db.prepare(`UPDATE audit_tree SET size = ?, frontier = ?`).run(frontier.size, encodeFrontier(frontier));
  } finally {
    db.close();
  }
  return path;
}

const cell = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('"', '\\', '\u0000\u001f\u007f', '\u2028\u2029', 'é😀', '\ud800', ''),
);

describe('when the worker builds a leaf', () => {
  it('hashes text cells of any content to the bytes core/audit-record.ts defines (quotes, escapes, non-ASCII), the outcome header included where there is one', async () => {
    const t = await journalOf(4);
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            action_id: cell,
            session_id: fc.option(cell),
            lane: fc.option(cell),
            kind: cell,
            outcome: fc.option(cell),
          }),
          {
            minLength: 1,
            maxLength: 4,
          },
        ),
        async (cells) => {
          const path = rewritten(t, cells);
          let mode: string | undefined;
          const report = await verifyJournal({
            dbPath: path,
            threads: 1,
            parallelRowsMin: 1,
            chunkRowsLog2: 2,
            onMode: (m) => (mode = m),
          });
          expect(report).toMatchObject({ ok: true, events: 4 });
          expect(mode).toBe('workers');
        },
      ),
      { numRuns: 25 },
    );
  });
});
