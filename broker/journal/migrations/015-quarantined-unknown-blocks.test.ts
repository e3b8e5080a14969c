import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../contract/index.js';
import { attestClassification } from '../../core/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { restoreOutcomeMinutesBefore022 } from '../../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { migrate } from '../migrate.js';
import { recoveryEvent } from '../recovery.js';
import { migration015QuarantinedUnknownBlocks } from './015-quarantined-unknown-blocks.js';
import { journalMigrations } from './index.js';

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

const upTo14 = journalMigrations.filter((m) => m.version < migration015QuarantinedUnknownBlocks.version);
const person = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
const abandoned = 'act_q015_abandoned';
const attested = 'act_q015_attested';
const blocking = 'act_q015_blocking';
const settledElsewhere = 'act_q015_committed';
const abandonedThenAttested = 'act_q015_abandoned_attested';

/** Admitted and approved, then recovery in a quarantined journal records it unknown before any DISPATCH_STARTED. */
async function quarantinedUnknown(id: string): Promise<void> {
  const script = actionPaths.httpApproved(id);
  for (const event of script.slice(
    0,
    script.findIndex((e) => e.kind === 'DISPATCH_STARTED'),
  ))
    await t.journal.append(event);
  const state = t.journal.getAction(id);
  const recovered = state === undefined ? undefined : recoveryEvent(state, t.clock.nowMs(), 'quarantined');
  if (recovered === undefined) throw new Error('recovery recorded nothing');
  await t.journal.append(recovered);
}

const resolvedOf = (db: Database.Database, id: string): unknown =>
  (db.prepare(`SELECT resolved_at_ms FROM actions WHERE action_id = ?`).get(id) as { resolved_at_ms: unknown })
    .resolved_at_ms;

describe('when a version 14 journal holds unknowns a quarantined recovery recorded before dispatch', () => {
  it('re-derives resolved_at_ms as the fold does: the unknown one blocks lane-a again, the ended ones keep their end', async () => {
    await quarantinedUnknown(abandoned);
    await quarantinedUnknown(attested);
    t.clock.advance(1_000);
    const abandonedAt = t.clock.nowMs();
    await t.journal.append({ kind: 'ABANDONED', action_id: abandoned, payload: { actor: person, reason: 'gave up' } });
    t.clock.advance(1_000);
    const attestedAt = t.clock.nowMs();
    const attest: NewEvent = {
      kind: 'OPERATOR_ATTESTED',
      action_id: attested,
      payload: { actor: person, basis: 'saw it' },
      classification: attestClassification('committed', 'succeeded'),
    };
    await t.journal.append(attest);
    // Abandoned, then a person learned it committed: the lane stopped waiting at the abandonment.
    await quarantinedUnknown(abandonedThenAttested);
    t.clock.advance(1_000);
    const abandonedFirstAt = t.clock.nowMs();
    await t.journal.append({
      kind: 'ABANDONED',
      action_id: abandonedThenAttested,
      payload: { actor: person, reason: 'gave up' },
    });
    t.clock.advance(1_000);
    await t.journal.append({ ...attest, action_id: abandonedThenAttested });
    await quarantinedUnknown(blocking);
    await t.journal.appendBatch(actionPaths.httpNoApproval(settledElsewhere));
    expect(t.journal.laneHeads().heads.get('lane-a')).toBe(t.journal.getAction(blocking)?.ticket);
    const fold = {
      abandoned: t.journal.getActionTimeline(abandoned)?.resolved_at_ms,
      attested: t.journal.getActionTimeline(attested)?.resolved_at_ms,
      committed: t.journal.getActionTimeline(settledElsewhere)?.resolved_at_ms,
    };
    expect(fold).toEqual({ abandoned: abandonedAt, attested: attestedAt, committed: expect.any(Number) });
    expect(t.journal.getActionTimeline(abandonedThenAttested)?.resolved_at_ms).toBe(abandonedFirstAt);
    expect(t.journal.getAction(abandonedThenAttested)?.outcome).toBe('committed');
    expect(t.journal.getActionTimeline(blocking)?.resolved_at_ms).toBeNull();
    await t.journal.close();

    // What a version 14 broker wrote: such an unknown read as resolved from the moment recovery recorded it.
    const old = new Database(t.path);
    old.exec(`
      UPDATE actions SET resolved_at_ms = settled_at_ms WHERE dispatch_seq IS NULL AND outcome IS NOT NULL;
      DROP TABLE session_counters;
      DROP INDEX sessions_by_first_seq;
      ALTER TABLE recordings DROP COLUMN alive_at_ms;
      PRAGMA user_version = 14;
    `);
    restoreOutcomeMinutesBefore022(old);
    expect(resolvedOf(old, blocking)).not.toBeNull();
    expect(resolvedOf(old, abandoned)).not.toBe(abandonedAt);
    const events = old.prepare('SELECT * FROM events ORDER BY seq').all();
    expect(migrate(old, [...upTo14, migration015QuarantinedUnknownBlocks])).toBe(15);
    expect(resolvedOf(old, blocking)).toBeNull();
    expect(resolvedOf(old, abandoned)).toBe(abandonedAt);
    expect(resolvedOf(old, attested)).toBe(attestedAt);
    expect(resolvedOf(old, abandonedThenAttested)).toBe(abandonedFirstAt);
    expect(resolvedOf(old, settledElsewhere)).toBe(fold.committed);
    expect(old.prepare('SELECT * FROM events ORDER BY seq').all()).toEqual(events);
    old.close();

    // The journal opens on it: the lane loader finds the unknown head, so the queue keeps lane-a blocked.
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(journal.laneHeads().heads.get('lane-a')).toBe(journal.getAction(blocking)?.ticket);
      expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([blocking]);
    } finally {
      await journal.close();
    }
  });
});
