import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { idempotencyKeysExpiringAfterSql } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration023IdempotencyKeysByExpiry } from './023-idempotency-keys-by-expiry.js';

function plan(db: Database.Database): string {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${idempotencyKeysExpiringAfterSql}`)
    .all(0)
    .map((r) => (r as { detail: string }).detail)
    .join('\n');
}

describe('migration 023: the idempotency book reads only the live bindings at open', () => {
  it('when a version 22 journal is migrated: the open-time read is a range of the expiry index, not a scan, rows unchanged', () => {
    const db = new Database(':memory:');
    try {
      migrate(db, journalMigrations.slice(0, 22));
      const insert = db.prepare(
        `INSERT INTO idempotency_keys (route, scope, key, fingerprint, action_id, first_seen_ms, expires_at_ms, bound_seq)
         VALUES (?, 'docs.account', ?, 'sha256:x', ?, 0, ?, ?)`,
      );
      // Many long-expired bindings and a few live ones: what the table holds after months of keyed requests.
      db.transaction(() => {
        for (let i = 0; i < 2_000; i += 1) insert.run('docs', `old-${i}`, `act_old_${i}`, 1_000 + i, i + 1);
        for (let i = 0; i < 3; i += 1) insert.run('docs', `live-${i}`, `act_live_${i}`, 9_000_000 + i, 5_000 + i);
      })();
      expect(plan(db)).toMatch(/^SCAN idempotency_keys$/m);
      const rows = (): unknown => db.prepare('SELECT * FROM idempotency_keys ORDER BY route, scope, key').all();
      const before = rows();

      expect(migrate(db, journalMigrations.slice(0, 23))).toBe(migration023IdempotencyKeysByExpiry.version);
      expect(schemaVersion(db)).toBe(23);
      expect(plan(db)).toMatch(
        /^SEARCH idempotency_keys USING INDEX idempotency_keys_by_expiry \(expires_at_ms>\?\)$/m,
      );
      expect(plan(db)).not.toMatch(/^SCAN/m);
      expect(rows()).toEqual(before);
      const live = db.prepare(idempotencyKeysExpiringAfterSql).all(5_000_000) as Array<{ key: string }>;
      expect(live.map((r) => r.key).sort()).toEqual(['live-0', 'live-1', 'live-2']);
    } finally {
      db.close();
    }
  });
});
