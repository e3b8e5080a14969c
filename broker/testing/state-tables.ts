import Database from 'better-sqlite3';

export interface StateTables {
  actions: unknown[];
  sessions: unknown[];
  idempotency_keys: unknown[];
  session_counters: unknown[];
}

/**
 * Reads the current-state tables through a separate read-only connection, in key order, so two
 * journals can be compared row for row.
 */
export function readStateTables(dbPath: string): StateTables {
  const db = new Database(dbPath, { readonly: true });
  try {
    return {
      actions: db.prepare('SELECT * FROM actions ORDER BY action_id').all(),
      sessions: db.prepare('SELECT * FROM sessions ORDER BY session_id').all(),
      idempotency_keys: db.prepare('SELECT * FROM idempotency_keys ORDER BY route, scope, key').all(),
      session_counters: db.prepare('SELECT * FROM session_counters ORDER BY session_id').all(),
    };
  } finally {
    db.close();
  }
}
