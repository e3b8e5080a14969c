import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { readDecryptedEvents } from './read-decrypted-events.js';

/*
 * Run 0 means "plaintext, written before encryption existed" (migration 004), and only the journal's first events can
 * be that. The events table refuses updates and deletes, not inserts, so another process of the user can add a row
 * that claims run 0 with a body of its choosing (THREAT-MODEL: the data directory is the agent's to write). Such a row,
 * below seq 1 or after the first sealed event, is refused as a row that fails authentication is, never read as the
 * journal's own record. The legacy prefix itself still opens (migrations/004-audit-log.test.ts).
 */
const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

describe('a run-0 row another process inserts', () => {
  it('below seq 1 or after the sealed events, it is refused by every read that would open it', async () => {
    const t = await openTempJournal();
    opened.push(t);
    const id = 'act_plain_prefix_1';
    for (const event of actionPaths.httpApproved(id)) await t.journal.append(event);
    const real = t.journal.subjectEvents(id);
    const [accepted] = real;
    if (accepted === undefined) throw new Error('no events');

    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const row = forger.prepare('SELECT * FROM events WHERE seq = ?').get(accepted.seq) as Record<string, unknown>;
      const columns = Object.keys(row);
      const insert = forger.prepare(
        `INSERT INTO events (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
      );
      // The admission as the agent would have it: its plaintext body, claimed unsealed.
      const body = Buffer.from(JSON.stringify({ payload: accepted.payload }), 'utf8');
      for (const seq of [-3, real.length + 1_000])
        insert.run({ ...row, seq, run: 0, nonce: Buffer.alloc(0), ciphertext: body });
    } finally {
      forger.close();
    }

    const refused = /is unsealed \(run 0\) outside the journal's plaintext prefix \(events 1–0\)/;
    expect(() => t.journal.subjectEvents(id)).toThrow(refused);
    expect(() => [...t.journal.events(-10)]).toThrow(refused);
    expect(() => t.journal.eventsPage(1, 2_000, { action_id: id })).toThrow(refused);
    const exported = async (): Promise<void> => {
      for await (const event of readDecryptedEvents(t.path, t.vault, -10, Number.MAX_SAFE_INTEGER)) void event;
    };
    await expect(exported()).rejects.toThrow(refused);
  });
});
