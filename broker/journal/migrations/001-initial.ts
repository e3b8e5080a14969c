import type { Migration } from '../migration.js';

/**
 * The append-only event log and the current-state tables projected from it.
 *
 * What may be stored: events hold action ids, session ids, tickets, lanes, sanitized targets,
 * credential ids with non-secret version tags and injection modes, request fingerprints and result
 * digests — never a secret, a header value or a body. The zod payload schemas in broker/contract
 * constrain every payload to that shape and are strict (an unnamed field is refused), so an extra
 * field cannot smuggle a secret in.
 *
 * seq is AUTOINCREMENT so an append position is never reused, even after a rolled-back commit;
 * triggers make the log append-only at the database level, not just by convention. Current state
 * (actions, attempts, tickets) is rebuilt by replaying events; `actions.state` holds the whole
 * ActionState as JSON, the other columns are there to be queried.
 */
export const migration001Initial: Migration = {
  version: 1,
  name: 'initial',
  // eslint-disable-next-line max-lines-per-function -- the initial schema as one SQL script; a shipped migration never changes
  up(db) {
    db.exec(`
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        action_id TEXT NOT NULL,
        session_id TEXT,
        ticket INTEGER,
        lane TEXT,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL CHECK (json_valid(payload)),
        classification TEXT CHECK (classification IS NULL OR json_valid(classification))
      ) STRICT;

      CREATE TRIGGER events_no_update BEFORE UPDATE ON events
      BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
      CREATE TRIGGER events_no_delete BEFORE DELETE ON events
      BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

      CREATE TABLE actions (
        action_id TEXT PRIMARY KEY,
        session_id TEXT,
        ticket INTEGER UNIQUE,
        lane TEXT,
        channel TEXT NOT NULL,
        target TEXT NOT NULL,
        request_fingerprint TEXT NOT NULL,
        approval TEXT NOT NULL,
        idempotent INTEGER NOT NULL,
        stage TEXT NOT NULL,
        decision TEXT,
        dispatch_evidence TEXT NOT NULL,
        dispatch_seq INTEGER,
        outcome TEXT,
        phase TEXT,
        retry TEXT,
        code TEXT,
        effect TEXT,
        outcome_basis TEXT,
        source TEXT,
        retry_after_ms INTEGER,
        caller_disposition TEXT,
        recorded INTEGER NOT NULL,
        result_id TEXT,
        result_digest TEXT,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        accepted_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (json_valid(state))
      ) STRICT;

      CREATE TABLE attempts (
        action_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        state TEXT NOT NULL,
        setup_stage TEXT,
        connection TEXT,
        connection_id TEXT,
        dispatch_seq INTEGER,
        request_complete INTEGER NOT NULL,
        response_started INTEGER NOT NULL,
        response_complete INTEGER NOT NULL,
        response_status INTEGER,
        connection_lost INTEGER NOT NULL,
        exit_status INTEGER,
        exit_signal TEXT,
        channel_closed INTEGER NOT NULL,
        stdout_bytes INTEGER NOT NULL,
        stderr_bytes INTEGER NOT NULL,
        body_bytes INTEGER NOT NULL,
        PRIMARY KEY (action_id, n)
      ) STRICT;

      CREATE TABLE tickets (
        ticket INTEGER PRIMARY KEY,
        action_id TEXT NOT NULL UNIQUE,
        session_id TEXT,
        lane TEXT,
        decision TEXT,
        outcome TEXT,
        dispatch_seq INTEGER,
        accepted_seq INTEGER NOT NULL,
        accepted_at_ms INTEGER NOT NULL
      ) STRICT;

      -- last_ticket: tickets are issued by the journal and never reused, even across restarts.
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) STRICT;
      INSERT INTO meta (key, value) VALUES ('last_ticket', 0);
    `);
  },
};
