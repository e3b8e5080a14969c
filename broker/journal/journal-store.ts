import type { Database, Statement } from 'better-sqlite3';
import {
  kindsRequiringClassification,
  type ActionState,
  type EventKind,
  type SessionState,
} from '../contract/index.js';
import {
  actionCountsOf,
  restingActionCountsOf,
  type RestingActionCounts,
  countedAction,
  counterDelta,
  counterKeyId,
  outcomeRowsOf,
  rateBuckets,
  sessionCountDelta,
  sessionCounted,
  splitActionTarget,
  type ActionTimeline,
  type BoundIdempotencyKey,
  type CountedAction,
  type CounterKey,
  type CounterRow,
  type CredentialRequestEventHeader,
  type MinuteRow,
  type OutcomeCountRow,
  type SessionCounted,
} from '../core/index.js';
import {
  counterKeyColumns,
  countEventsSql,
  inFlightSql,
  lastSeqSql,
  readCountersSql,
  readTreeSql,
} from './snapshot-sql.js';
import { upgradeActionState, upgradeSessionState } from './upgrade-stored-state.js';
import { dispatchMarkKindsSql } from './migrations/024-dispatch-marks.js';
import { eventsHaveOutcomeColumn, outcomeMarksWhereSql } from './migrations/025-outcome-headers.js';
import type { LogFacts } from './recovery.js';
import type { BoundBinding } from './idempotency-book.js';

/**
 * A transaction's counter changes, summed by row: action_counters by counterKeyId, the rate's outcome_minutes by minute
 * and counter key (in_flight included, schema 22), session_counters by session id. JournalStore.writeState sums, writeCounts writes (newCounterTally makes
 * an empty one).
 */
export interface CounterTally {
  readonly counts: Map<string, { readonly key: CounterKey; n: number }>;
  readonly minutes: Map<string, { readonly minute: number; readonly key: CounterKey; n: number }>;
  readonly sessions: Map<string, { calls: number; pending: number }>;
}

export function newCounterTally(): CounterTally {
  return { counts: new Map(), minutes: new Map(), sessions: new Map() };
}

/** What the status counters read of an action's row as stored (countedAction and sessionCounted of it). */
export interface StoredCounts {
  readonly action: CountedAction;
  readonly session: SessionCounted;
}

/** The counted form of a stored row (StoredCounts). */
export function storedCountsOf(stored: ActionState): StoredCounts {
  return { action: countedAction(stored), session: sessionCounted(stored) };
}

/**
 * One action's row as a commit writes it (JournalStore.writeState), as plain data: the new state and timeline, and what
 * the write needs of the rows before it — nothing else of them. Inline, the row before comes as the loop's own objects
 * (`stored`, `written`: no copy); to the writer thread, only the seq that names it (`writtenSeq`), since whatever a
 * batch holds is copied twice on its way (docs/journal-writer-thread.md, "Send less").
 */
export interface ActionRowWrite {
  readonly state: ActionState;
  readonly timeline: ActionTimeline;
  /**
   * The counted form of the row as the database holds it, for the counters' difference; undefined when the planner did
   * not load it (or there is none), or when `writtenSeq` names the row: writeState then reads it from the row it finds
   * (the table's, or for `writtenSeq` the writer's own memory of it), so no action is counted twice.
   */
  readonly stored?: StoredCounts | undefined;
  /**
   * The row as this connection last wrote it (StateCache), only to skip the columns that did not move; undefined (and
   * no `writtenSeq`): the whole row is written.
   */
  readonly written?: { readonly state: ActionState; readonly timeline: ActionTimeline } | undefined;
  /**
   * Instead of `stored` and `written`, for a writer on another thread: the row is in the table, and this is its
   * `last_seq` as last written (the loop's StateCache, or a batch in flight before this one). Every write of a row folds
   * a new event into it, so the seq names one version of the row: the writer compares against its own memory of the
   * row when that names the same seq (WrittenRow), else reads the row from the table.
   */
  readonly writtenSeq?: number | undefined;
}

/** One value of an actions row's columns (actionColumns, in that order). */
export type ActionColumnValue = string | number | null;

/** An actions row as some writer wrote it: its state's last_seq, and its column values (actionColumns' order). */
export interface WrittenRow {
  readonly lastSeq: number;
  readonly values: readonly ActionColumnValue[];
}

/** A session with the figures sessions.list shows beside it (session_counters, schema 17). */
export interface CountedSession {
  readonly session: SessionState;
  /** Every action of the session. */
  readonly calls: number;
  /** Those neither classified nor dispatched: not sent yet. */
  readonly pending: number;
}

/** An events row as stored since schema 4: plaintext header columns, sealed body, leaf hash. */
/** Plaintext header columns a page of events can be narrowed to (an action's rows win over a session's). */
export interface EventHeaderFilter {
  readonly action_id?: string;
  readonly session_id?: string;
}

export interface EventRow {
  seq: number;
  at_ms: number;
  action_id: string;
  session_id: string | null;
  ticket: number | null;
  lane: string | null;
  kind: string;
  /** audit_runs.run whose key sealed the body; 0 = plaintext rows from before schema 4. */
  run: number;
  /** The outcome the event sets (core eventOutcomeHeader), part of its sealed header; null (or absent before schema 25). */
  outcome?: string | null;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  leaf_hash: Uint8Array;
}

/** What the log's plaintext headers say of one action's dispatches (seqs; null where there is none). */
export interface DispatchMarks {
  readonly action_id: string;
  readonly first_dispatch: number | null;
  readonly last_dispatch: number | null;
  /** The last event of a kind that must carry a classification (kindsRequiringClassification). */
  readonly last_classified: number | null;
}

const dispatchMarksSelect = `SELECT min(CASE WHEN kind = 'DISPATCH_STARTED' THEN seq END) AS first_dispatch,
  max(CASE WHEN kind = 'DISPATCH_STARTED' THEN seq END) AS last_dispatch,
  max(CASE WHEN kind <> 'DISPATCH_STARTED' THEN seq END) AS last_classified`;

/**
 * The actions whose last DISPATCH_STARTED has no event of a classified kind after it, with their marks (DispatchMarks):
 * one pass over events_dispatch_marks (migration 024), a covering index, so no event row is read.
 */
export const openDispatchesSql = `${dispatchMarksSelect}, action_id FROM events WHERE kind IN (${dispatchMarkKindsSql})
  GROUP BY action_id HAVING last_dispatch > coalesce(last_classified, 0)`;

/**
 * The actions whose last header naming an outcome (migration 025: core eventOutcomeHeader) names unknown, and that hold
 * no ABANDONED header (a person's abandonment is never undone): the log's unresolved unknowns, in flight or recorded (a
 * blocked lane's head). One pass over events_outcome_marks, a covering index, so no event row is read.
 */
export const openOutcomesSql = `SELECT action_id FROM events WHERE ${outcomeMarksWhereSql} GROUP BY action_id
  HAVING max(kind = 'ABANDONED') = 0
    AND max(CASE WHEN outcome IS NOT NULL THEN seq END) = max(CASE WHEN outcome = 'unknown' THEN seq END)`;

/** An event's plaintext header columns, as a credential request's fold reads them. */
type SubjectHeaderRow = Pick<EventRow, 'seq' | 'at_ms' | 'kind' | 'action_id' | 'session_id'>;

/** The kinds that must carry a classification (contract kindsRequiringClassification), as an SQL list. */

const classifiedKindsSql = [...kindsRequiringClassification].map((kind) => `'${kind}'`).join(', ');

function headerOf(row: SubjectHeaderRow): CredentialRequestEventHeader {
  // The kind column holds only kinds the contract named when the row was written (validateNewEvent).
  return { ...row, kind: row.kind as EventKind };
}

export interface AuditKeysRow {
  box_public: Uint8Array;
  sign_public: Uint8Array;
  box_secret_wrapped: Uint8Array;
  sign_secret_wrapped: Uint8Array;
  created_at_ms: number;
}

export interface CheckpointRow {
  size: number;
  root: Uint8Array;
  at_ms: number;
  reason: string;
  signature: Uint8Array;
}

/** The audit tables as the AuditWriter uses them (schema 4). */
export interface AuditStore {
  countEvents(): number;
  readTree(): { size: number; frontier: Uint8Array } | undefined;
  writeTree(size: number, frontier: Uint8Array): void;
  readKeys(): AuditKeysRow | undefined;
  insertKeys(keys: AuditKeysRow): void;
  insertRun(startedAtMs: number, sealedKey: Uint8Array | null): number;
  setRunSealedKey(run: number, sealedKey: Uint8Array): void;
  readRunSealedKey(run: number): Uint8Array | undefined;
  /**
   * The last seq of the plaintext prefix: the events migration 004 moved as run 0, which all come before the first
   * sealed event (0: none). Read as the journal opens.
   */
  plaintextPrefixEnd(): number;
  endRun(run: number, atMs: number, reason: string): void;
  lastCheckpointSize(): number;
  insertCheckpoint(checkpoint: CheckpointRow): void;
}

/** The idempotency book's read at open: one range of migration 023's index on the expiry, never the whole table. */
export const idempotencyKeysExpiringAfterSql = `SELECT route, scope, key, fingerprint, expires_at_ms
  FROM idempotency_keys WHERE expires_at_ms > ?`;

/**
 * The SQL of the journal over one connection: prepared once, no decisions. Every write here runs
 * inside the journal's transaction; the caller owns BEGIN/COMMIT.
 */
export class JournalStore implements AuditStore {
  /**
   * The newest minute the rate's buckets were pruned for on this connection. Memory only: a rolled-back prune just
   * leaves older buckets until the next minute, and readers ignore buckets outside the hour anyway.
   */
  private prunedForMinute = -Infinity;
  /** updateChanged's statements by the column set they assign. */
  private readonly updates = new Map<string, Statement>();
  /** Whether the events table has the outcome header column (outcomeHeaders), read once. */
  private outcomeColumn: boolean | undefined;
  private readonly sql: {
    lastSeq: () => Statement<[], { seq: number }>;
    lastTicket: () => Statement<[], { value: number }>;
    setLastTicket: () => Statement<[number]>;
    countEvents: () => Statement<[], { n: number }>;
    readCounters: () => Statement<[], CounterRow>;
    readMinutes: () => Statement<[], MinuteRow>;
    bumpCounter: () => Statement<[CounterKey & { n: number }]>;
    bumpMinute: () => Statement<[CounterKey & { minute: number; n: number }]>;
    dropMinute: () => Statement<[CounterKey & { minute: number; n: number }]>;
    pruneMinutes: () => Statement<[number]>;
    bumpSession: () => Statement<[{ session_id: string; calls: number; pending: number }]>;
    loadCounted: () => Statement<[string], CountedRowColumns>;
    insertEvent: () => Statement<[EventRow]>;
    readTree: () => Statement<[], { size: number; frontier: Uint8Array }>;
    writeTree: () => Statement<[number, Uint8Array]>;
    readKeys: () => Statement<[], AuditKeysRow>;
    insertKeys: () => Statement<[AuditKeysRow]>;
    insertRun: () => Statement<[number, Uint8Array | null]>;
    setRunSealedKey: () => Statement<[Uint8Array, number]>;
    readRunSealedKey: () => Statement<[number], { sealed_key: Uint8Array | null }>;
    endRun: () => Statement<[number, string, number]>;
    lastCheckpointSize: () => Statement<[], { size: number | null }>;
    insertCheckpoint: () => Statement<[CheckpointRow]>;
    readEvents: () => Statement<[number, number], EventRow>;
    readSessionEvents: () => Statement<[string, number, number], EventRow>;
    readActionEvents: () => Statement<[string, number, number], EventRow>;
    loadState: () => Statement<[string], { state: string }>;
    listStates: () => Statement<[number, number], { state: string }>;
    unrecordedIds: () => Statement<[], { action_id: string }>;
    upsertAction: () => Statement<unknown[]>;
    upsertSession: () => Statement<[Record<string, unknown>]>;
    unresolvedLaneStates: () => Statement<[], { state: string }>;
    listSessionActions: () => Statement<[string, number], { state: string }>;
    readSubjectEvents: () => Statement<[string, number], EventRow>;
    readSubjectEventsAfter: () => Statement<[string, number, number], EventRow>;
    readSubjectHeaders: () => Statement<[string], SubjectHeaderRow>;
    readSubjectKinds: () => Statement<[string], { kind: string }>;
    openDispatches: () => Statement<[], DispatchMarks>;
    logFacts: () => Statement<
      [string],
      Pick<LogFacts, 'first_dispatch' | 'last_dispatch' | 'last_classified' | 'last_seq'> & { abandoned: number | null }
    >;
    lastOutcome: () => Statement<[string], { outcome: string }>;
    openOutcomes: () => Statement<[], { action_id: string }>;
    admission: () => Statement<
      [string],
      { kind: string; session_id: string | null; ticket: number | null; lane: string | null }
    >;
    strayHeaders: () => Statement<[string, string | null, number | null, string | null], { n: number }>;
    readSubjectRuns: () => Statement<[string, number], { run: number }>;
    readClassifiedHeaders: () => Statement<[string, number], SubjectHeaderRow>;
    readCredentialRequestHeaders: () => Statement<[number], SubjectHeaderRow>;
    loadIdempotencyKey: () => Statement<[string, string, string], BoundIdempotencyKey>;
    upsertIdempotencyKey: () => Statement<[BoundIdempotencyKey]>;
    loadTimeline: () => Statement<[string], ActionTimeline>;
    loadColumns: () => Statement<[string], ActionColumnValue[]>;
  };

  // eslint-disable-next-line max-lines-per-function -- a flat table of prepared statements, one per query
  constructor(private readonly db: Database) {
    this.sql = {
      lastSeq: lazy(db, lastSeqSql),
      lastTicket: lazy(db, `SELECT value FROM meta WHERE key = 'last_ticket'`),
      setLastTicket: lazy(db, `UPDATE meta SET value = ? WHERE key = 'last_ticket'`),
      countEvents: lazy(db, countEventsSql),
      ...counterStatements(db),
      insertEvent: lazy(
        db,
        `
        INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, outcome, nonce, ciphertext,
          leaf_hash)
        VALUES (@seq, @at_ms, @action_id, @session_id, @ticket, @lane, @kind, @run, @outcome, @nonce, @ciphertext,
          @leaf_hash)`,
      ),
      readTree: lazy(db, readTreeSql),
      writeTree: lazy(db, `UPDATE audit_tree SET size = ?, frontier = ? WHERE id = 1`),
      readKeys: lazy(
        db,
        `SELECT box_public, sign_public, box_secret_wrapped, sign_secret_wrapped, created_at_ms FROM audit_keys WHERE id = 1`,
      ),
      insertKeys: lazy(
        db,
        `
        INSERT INTO audit_keys (id, box_public, sign_public, box_secret_wrapped, sign_secret_wrapped, created_at_ms)
        VALUES (1, @box_public, @sign_public, @box_secret_wrapped, @sign_secret_wrapped, @created_at_ms)`,
      ),
      insertRun: lazy(
        db,
        `INSERT INTO audit_runs (run, started_at_ms, sealed_key) VALUES ((SELECT max(run) + 1 FROM audit_runs), ?, ?)`,
      ),
      setRunSealedKey: lazy(db, `UPDATE audit_runs SET sealed_key = ? WHERE run = ? AND sealed_key IS NULL`),
      readRunSealedKey: lazy(db, `SELECT sealed_key FROM audit_runs WHERE run = ?`),
      endRun: lazy(db, `UPDATE audit_runs SET ended_at_ms = ?, end_reason = ? WHERE run = ?`),
      lastCheckpointSize: lazy(db, `SELECT max(size) AS size FROM checkpoints`),
      insertCheckpoint: lazy(
        db,
        `
        INSERT OR IGNORE INTO checkpoints (size, root, at_ms, reason, signature)
        VALUES (@size, @root, @at_ms, @reason, @signature)`,
      ),
      readEvents: lazy(db, `SELECT * FROM events WHERE seq >= ? ORDER BY seq LIMIT ?`),
      // Through events_by_session (session_id, seq) and events_by_action (action_id, seq): the rows of one id only.
      readSessionEvents: lazy(db, `SELECT * FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`),
      readActionEvents: lazy(db, `SELECT * FROM events WHERE action_id = ? AND seq >= ? ORDER BY seq LIMIT ?`),
      loadState: lazy(db, `SELECT state FROM actions WHERE action_id = ?`),
      listStates: lazy(db, `SELECT state FROM actions WHERE ticket >= ? ORDER BY ticket LIMIT ?`),
      // Unrecorded covers both recovery cases: dispatched without a classification, and open
      // before dispatch (outcome is null exactly while nothing has classified the action).
      unrecordedIds: lazy(
        db,
        `
        SELECT action_id FROM actions WHERE ${inFlightSql} ORDER BY first_seq`,
      ),
      upsertAction: lazy(db, upsertActionSql),
      loadColumns: lazy(db, loadColumnsSql, (statement) => statement.raw(true)),
      loadTimeline: lazy(
        db,
        `
        SELECT decided_by, decided_at_ms, decided_seq, dispatched_at_ms, settled_at_ms, resolved_at_ms
        FROM actions WHERE action_id = ?`,
      ),
      upsertSession: lazy(
        db,
        `
        INSERT INTO sessions (session_id, status, pid, start_time, first_seq, last_seq, state)
        VALUES (@session_id, @status, @pid, @start_time, @first_seq, @last_seq, @state)
        ON CONFLICT (session_id) DO UPDATE SET
          status = excluded.status, last_seq = excluded.last_seq, state = excluded.state`,
      ),
      // resolved_at_ms is null while the ticket is unresolved (the fold's timeline; migration 010 filled older rows
      // the same way or left them null): a superset, which the caller filters by ticketStanding.
      unresolvedLaneStates: lazy(
        db,
        `SELECT state FROM actions WHERE resolved_at_ms IS NULL AND ticket IS NOT NULL AND lane IS NOT NULL`,
      ),
      listSessionActions: lazy(db, `SELECT state FROM actions WHERE session_id = ? ORDER BY ticket LIMIT ?`),
      readSubjectEvents: lazy(db, `SELECT * FROM events WHERE action_id = ? ORDER BY seq LIMIT ?`),
      readSubjectEventsAfter: lazy(db, `SELECT * FROM events WHERE action_id = ? AND seq > ? ORDER BY seq LIMIT ?`),
      readSubjectKinds: lazy(db, `SELECT DISTINCT kind FROM events WHERE action_id = ?`),
      // Through events_dispatch_marks (migration 024), covering: one pass over the index, no event row read.
      openDispatches: lazy(db, openDispatchesSql),
      // Through events_by_action, each over one action's events from seq 1 (as a fold reads them), in SQLite.
      logFacts: lazy(
        db,
        `SELECT min(CASE WHEN kind = 'DISPATCH_STARTED' THEN seq END) AS first_dispatch,
          max(CASE WHEN kind = 'DISPATCH_STARTED' THEN seq END) AS last_dispatch,
          max(CASE WHEN kind IN (${classifiedKindsSql}) THEN seq END) AS last_classified,
          max(seq) AS last_seq, max(kind = 'ABANDONED') AS abandoned
        FROM events WHERE action_id = ? AND seq > 0`,
      ),
      lastOutcome: lazy(
        db,
        `SELECT outcome FROM events WHERE action_id = ? AND seq > 0 AND outcome IS NOT NULL ORDER BY seq DESC LIMIT 1`,
      ),
      openOutcomes: lazy(db, openOutcomesSql),
      admission: lazy(
        db,
        `SELECT kind, session_id, ticket, lane FROM events WHERE action_id = ? AND seq > 0 ORDER BY seq LIMIT 1`,
      ),
      strayHeaders: lazy(
        db,
        `SELECT count(*) AS n FROM events WHERE action_id = ? AND seq > 0
          AND (session_id IS NOT ? OR ticket IS NOT ? OR lane IS NOT ?)`,
      ),
      readSubjectRuns: lazy(
        db,
        `SELECT DISTINCT run FROM (SELECT run FROM events WHERE action_id = ? ORDER BY seq LIMIT ?)`,
      ),
      readClassifiedHeaders: lazy(
        db,
        `SELECT seq, at_ms, kind, action_id, session_id FROM events
        WHERE action_id = ? AND kind IN (${classifiedKindsSql}) ORDER BY seq LIMIT ?`,
      ),
      // A credential request has a few events (asked, answered): its whole header list is small.
      readSubjectHeaders: lazy(
        db,
        `SELECT seq, at_ms, kind, action_id, session_id FROM events WHERE action_id = ? ORDER BY seq LIMIT 16`,
      ),
      // The newest requests' headers: a range over events_by_action (every crq_ id sorts between 'crq_' and 'crq`').
      readCredentialRequestHeaders: lazy(
        db,
        `
        SELECT seq, at_ms, kind, action_id, session_id FROM events
        WHERE action_id IN (
          SELECT action_id FROM events
          WHERE action_id >= 'crq_' AND action_id < 'crq\`' AND kind = 'CREDENTIAL_REQUESTED'
          ORDER BY seq DESC LIMIT ?)
        ORDER BY seq`,
      ),
      loadIdempotencyKey: lazy(
        db,
        `
        SELECT route, scope, key, fingerprint, action_id, first_seen_ms, expires_at_ms, bound_seq
        FROM idempotency_keys WHERE route = ? AND scope = ? AND key = ?`,
      ),
      upsertIdempotencyKey: lazy(
        db,
        `
        INSERT INTO idempotency_keys (route, scope, key, fingerprint, action_id, first_seen_ms, expires_at_ms, bound_seq)
        VALUES (@route, @scope, @key, @fingerprint, @action_id, @first_seen_ms, @expires_at_ms, @bound_seq)
        ON CONFLICT (route, scope, key) DO UPDATE SET
          fingerprint = excluded.fingerprint, action_id = excluded.action_id,
          first_seen_ms = excluded.first_seen_ms, expires_at_ms = excluded.expires_at_ms,
          bound_seq = excluded.bound_seq`,
      ),
    };
  }

  /** The last append position ever used (0 for an empty log); AUTOINCREMENT never reuses one. */
  lastSeq(): number {
    return this.sql.lastSeq().get()?.seq ?? 0;
  }

  lastTicket(): number {
    const row = this.sql.lastTicket().get();
    if (row === undefined) throw new Error('meta.last_ticket is missing: the schema is not migrated');
    return row.value;
  }

  setLastTicket(ticket: number): void {
    this.sql.setLastTicket().run(ticket);
  }

  countEvents(): number {
    return this.sql.countEvents().get()?.n ?? 0;
  }

  /** From the counters (schema 11), not the actions table: the same numbers at any journal size. */
  actionCounts(): ActionCounts {
    return actionCountsOf(this.sql.readCounters().all());
  }

  /** The same counters as read with no broker running the journal: dispatched, no outcome recorded, is unknown. */
  restingActionCounts(): RestingActionCounts {
    return restingActionCountsOf(this.sql.readCounters().all());
  }

  insertEvent(row: EventRow): void {
    this.sql.insertEvent().run(row);
  }

  /** Raw rows: the journal opens them (decryption needs this run's or the vault's keys). */
  /** From `fromSeq` on, in append order; `only` keeps one action's or one session's rows (read by its index). */
  readEvents(fromSeq: number, limit: number, only: EventHeaderFilter = {}): EventRow[] {
    if (only.action_id !== undefined) return this.sql.readActionEvents().all(only.action_id, fromSeq, limit);
    if (only.session_id !== undefined) return this.sql.readSessionEvents().all(only.session_id, fromSeq, limit);
    return this.sql.readEvents().all(fromSeq, limit);
  }

  readTree(): { size: number; frontier: Uint8Array } | undefined {
    return this.sql.readTree().get();
  }

  writeTree(size: number, frontier: Uint8Array): void {
    this.sql.writeTree().run(size, frontier);
  }

  readKeys(): AuditKeysRow | undefined {
    return this.sql.readKeys().get();
  }

  insertKeys(keys: AuditKeysRow): void {
    this.sql.insertKeys().run(keys);
  }

  /** A new run number, one above every earlier one (run 0 is the pre-schema-4 plaintext). */
  insertRun(startedAtMs: number, sealedKey: Uint8Array | null): number {
    return Number(this.sql.insertRun().run(startedAtMs, sealedKey).lastInsertRowid);
  }

  setRunSealedKey(run: number, sealedKey: Uint8Array): void {
    this.sql.setRunSealedKey().run(sealedKey, run);
  }

  readRunSealedKey(run: number): Uint8Array | undefined {
    return this.sql.readRunSealedKey().get(run)?.sealed_key ?? undefined;
  }

  plaintextPrefixEnd(): number {
    // In seq order, stopped at the first sealed row: a journal that began sealed reads one row.
    const firstSealed = this.db.prepare('SELECT seq FROM events WHERE run <> 0 ORDER BY seq LIMIT 1').get() as
      { seq: number } | undefined;
    const row = this.db
      .prepare('SELECT MAX(seq) AS seq FROM events WHERE run = 0 AND seq >= 1 AND seq < ?')
      .get(firstSealed?.seq ?? Number.MAX_SAFE_INTEGER) as { seq: number | null };
    return row.seq ?? 0;
  }

  endRun(run: number, atMs: number, reason: string): void {
    this.sql.endRun().run(atMs, reason, run);
  }

  lastCheckpointSize(): number {
    return this.sql.lastCheckpointSize().get()?.size ?? 0;
  }

  insertCheckpoint(checkpoint: CheckpointRow): void {
    this.sql.insertCheckpoint().run(checkpoint);
  }

  /** Every stored state is read through upgradeActionState or upgradeSessionState: a row an older broker wrote comes back whole. */
  loadState(actionId: string): ActionState | undefined {
    const row = this.sql.loadState().get(actionId);
    return row === undefined ? undefined : upgradeActionState(row.state);
  }

  listStates(fromTicket: number, limit: number): ActionState[] {
    return this.sql
      .listStates()
      .all(fromTicket, limit)
      .map((row) => upgradeActionState(row.state));
  }

  /**
   * The sessions the journal holds in memory (SessionBook), read once as it opens: every one not ended with its process
   * (pending, approved, revoked) and the newest `endedKept` of those that did (status `ended`), by first event.
   */
  openingSessions(endedKept: number): SessionState[] {
    const rows = this.db.prepare(openingSessionsSql).all(endedKept) as Array<{ state: string }>;
    return rows.map((row) => upgradeSessionState(row.state));
  }

  /**
   * The figures (calls, pending) of these sessions, by id, from their counter rows (migration 017); a session with no
   * row has none yet (0 and 0). One read by primary key per id.
   */
  sessionFigures(sessionIds: readonly string[]): Map<string, { calls: number; pending: number }> {
    const rows = this.db
      .prepare(
        `SELECT session_id, calls, pending FROM session_counters
         WHERE session_id IN (SELECT value FROM json_each(?))`,
      )
      .all(JSON.stringify(sessionIds)) as Array<{ session_id: string; calls: number; pending: number }>;
    return new Map(rows.map((r) => [r.session_id, { calls: r.calls, pending: r.pending }]));
  }

  writeSession(session: SessionState): void {
    this.sql.upsertSession().run({
      session_id: session.session_id,
      status: session.status,
      pid: session.pid,
      start_time: session.start_time,
      first_seq: session.first_seq,
      last_seq: session.last_seq,
      state: JSON.stringify(session),
    });
  }

  /**
   * The stored state of every laned ticket that may be unresolved (a superset: some resolved ones come too), one row at
   * a time: an older journal's superset can be large, and the caller keeps only the unresolved.
   */
  *unresolvedLaneStates(): Iterable<ActionState> {
    for (const row of this.sql.unresolvedLaneStates().iterate()) yield upgradeActionState(row.state);
  }

  /**
   * Actions grouped by their current (phase, outcome, code, decision, dispatched), the last hour's by minute; null
   * outcome = still open before dispatch. Read from the counters (schema 11), a few hundred rows at most.
   */
  outcomeCounts(): OutcomeCountRow[] {
    return outcomeRowsOf(this.sql.readCounters().all(), this.sql.readMinutes().all());
  }

  readSubjectEvents(subjectId: string, limit: number): EventRow[] {
    return this.sql.readSubjectEvents().all(subjectId, limit);
  }

  /** One action's (or session's) events after `afterSeq`, in append order: a page of a longer read. */
  readSubjectEventsAfter(subjectId: string, afterSeq: number, limit: number): EventRow[] {
    return this.sql.readSubjectEventsAfter().all(subjectId, afterSeq, limit);
  }

  /** The kinds of a subject's events, from the plaintext header column (nothing is decrypted). */
  readSubjectKinds(subjectId: string): Set<EventKind> {
    // The kind column holds only kinds the contract named when the row was written (validateNewEvent).
    return new Set(
      this.sql
        .readSubjectKinds()
        .all(subjectId)
        .map((row) => row.kind as EventKind),
    );
  }

  /**
   * Every action the log's headers show dispatched and not classified since (its last DISPATCH_STARTED has no event of a
   * classified kind after it): what the log says a crash left in flight, whatever the `actions` rows say. A pass over
   * events_dispatch_marks, two or three entries an action dispatched (bench/recovery-marks.ts: ~70 ms a million events
   * on the development VM).
   */
  openDispatches(): DispatchMarks[] {
    return this.sql.openDispatches().all();
  }

  /** Whether the events carry outcome headers (schema 25 on; a migration test's journal may stop before it). */
  private outcomeHeaders(): boolean {
    this.outcomeColumn ??= eventsHaveOutcomeColumn(this.db);
    return this.outcomeColumn;
  }

  /**
   * Every action whose last header naming an outcome names unknown and that no person abandoned (openOutcomesSql):
   * what the log leaves unresolved, in flight or recorded, whatever the `actions` rows say. For headers written since
   * journal schema 25; a pass over events_outcome_marks.
   */
  openOutcomes(): string[] {
    if (!this.outcomeHeaders()) return [];
    return this.sql
      .openOutcomes()
      .all()
      .map((row) => row.action_id);
  }

  /**
   * What one action's plaintext event headers establish (recovery.ts LogFacts): four reads through events_by_action,
   * each over that action's events in SQLite (one row each reaches JavaScript), however many it has.
   */
  logFacts(actionId: string): LogFacts {
    const marks = this.sql.logFacts().get(actionId) ?? {
      first_dispatch: null,
      last_dispatch: null,
      last_classified: null,
      last_seq: null,
      abandoned: null,
    };
    const first = this.sql.admission().get(actionId);
    const admitted = first?.kind === 'ACTION_ACCEPTED' ? first : undefined;
    // As plan-unit's stamp writes them: an admission first, and every later header with its session, ticket and lane.
    const consistent =
      first === undefined ||
      (admitted !== undefined &&
        this.sql.strayHeaders().get(actionId, admitted.session_id, admitted.ticket, admitted.lane)?.n === 0);
    return {
      first_dispatch: marks.first_dispatch,
      last_dispatch: marks.last_dispatch,
      last_classified: marks.last_classified,
      last_seq: marks.last_seq,
      abandoned: marks.abandoned === 1,
      outcome: this.outcomeHeaders() ? (this.sql.lastOutcome().get(actionId)?.outcome ?? null) : null,
      session_id: admitted?.session_id ?? null,
      ticket: admitted?.ticket ?? null,
      lane: admitted?.lane ?? null,
      consistent,
    };
  }

  /** The runs that sealed a subject's first `limit` events (readSubjectEvents' rows), from the plaintext run column. */
  readSubjectRuns(subjectId: string, limit: number): number[] {
    return this.sql
      .readSubjectRuns()
      .all(subjectId, limit)
      .map((row) => row.run);
  }

  /** The plaintext headers of a subject's first `limit` events of a kind that carries a classification, in append order. */
  readClassifiedHeaders(subjectId: string, limit: number): CredentialRequestEventHeader[] {
    return this.sql.readClassifiedHeaders().all(subjectId, limit).map(headerOf);
  }

  /** One subject's plaintext event headers in append order (a credential request's state folds from these). */
  readSubjectHeaders(subjectId: string): CredentialRequestEventHeader[] {
    return this.sql.readSubjectHeaders().all(subjectId).map(headerOf);
  }

  /** The headers of the newest `limit` credential requests' events, in append order. */
  readCredentialRequestHeaders(limit: number): CredentialRequestEventHeader[] {
    return this.sql.readCredentialRequestHeaders().all(limit).map(headerOf);
  }

  listSessionActions(sessionId: string, limit: number): ActionState[] {
    return this.sql
      .listSessionActions()
      .all(sessionId, limit)
      .map((row) => upgradeActionState(row.state));
  }

  /** The binding of a key on a route and scope, expired or not (the caller compares times). */
  loadIdempotencyKey(route: string, scope: string, key: string): BoundIdempotencyKey | undefined {
    return this.sql.loadIdempotencyKey().get(route, scope, key);
  }

  /** Every binding that expires after `fromMs` (the journal's idempotency book, read once at open). */
  idempotencyKeysExpiringAfter(fromMs: number): IterableIterator<BoundBinding> {
    // Streamed: the book keeps a few bytes of each row, so the rows themselves are never all held at once.
    return this.db.prepare(idempotencyKeysExpiringAfterSql).iterate(fromMs) as IterableIterator<BoundBinding>;
  }

  /** A new binding, or a rebinding of a key whose earlier binding expired. */
  writeIdempotencyKey(row: BoundIdempotencyKey): void {
    this.sql.upsertIdempotencyKey().run({ ...row });
  }

  /**
   * The counter changes writeState summed for this transaction: one statement per row that moved. A minute's net
   * decrement stops at zero like the single ones it sums: a minute row is missing or short only once pruned (out of
   * the hour), and an increment only ever lands on the current minute, so no sum here mixes the two.
   */
  writeCounts(tally: CounterTally): void {
    for (const { key, n } of tally.counts.values()) if (n !== 0) this.sql.bumpCounter().run({ ...key, n });
    for (const [session_id, { calls, pending }] of tally.sessions)
      if (calls !== 0 || pending !== 0) this.sql.bumpSession().run({ session_id, calls, pending });
    let newest: number | undefined;
    for (const { minute, key, n } of tally.minutes.values()) {
      if (n === 0) continue;
      const { phase, outcome, code, decision, dispatched, in_flight } = key;
      const row = { minute, phase, outcome, code, decision, dispatched, in_flight, n: Math.abs(n) };
      // A decrement never inserts: the action's old minute may already be pruned.
      if (n < 0) this.sql.dropMinute().run(row);
      else {
        this.sql.bumpMinute().run(row);
        newest = Math.max(newest ?? minute, minute);
      }
    }
    // The rate's minutes that fell out of the hour go when a newer minute starts.
    if (newest !== undefined && newest > this.prunedForMinute) {
      this.sql.pruneMinutes().run(newest - rateBuckets);
      this.prunedForMinute = newest;
    }
  }

  private loadCounted(actionId: string): StoredCounts | undefined {
    const row = this.sql.loadCounted().get(actionId);
    return row === undefined ? undefined : storedCountsOfColumns(row);
  }

  /** Sums counterDelta and sessionCountDelta into the transaction's tally. */
  private countChange(before: StoredCounts | undefined, after: ActionState, tally: CounterTally): void {
    for (const { session_id, calls, pending } of sessionCountDelta(before?.session, sessionCounted(after))) {
      const summed = tally.sessions.get(session_id);
      if (summed === undefined) tally.sessions.set(session_id, { calls, pending });
      else {
        summed.calls += calls;
        summed.pending += pending;
      }
    }
    const delta = counterDelta(before?.action, countedAction(after));
    for (const { key, n } of delta.counts) {
      const id = counterKeyId(key);
      const summed = tally.counts.get(id);
      if (summed === undefined) tally.counts.set(id, { key, n });
      else summed.n += n;
    }
    for (const { minute, key, n } of delta.minutes) {
      const id = `${minute} ${counterKeyId(key)}`;
      const summed = tally.minutes.get(id);
      if (summed === undefined) tally.minutes.set(id, { minute, key, n });
      else summed.n += n;
    }
  }

  /** The action list's moments of one action as stored (schema 10); an action not stored yet has none. */
  loadTimeline(actionId: string): ActionTimeline | undefined {
    return this.sql.loadTimeline().get(actionId);
  }

  unrecordedActionIds(): string[] {
    return this.sql
      .unrecordedIds()
      .all()
      .map((row) => row.action_id);
  }

  /**
   * Writes one action's current state (and its timeline columns) into its actions row: the whole row when this connection
   * has not written it yet (`written` and `writtenSeq` undefined), else only the columns that moved.
   *
   * The status counters move by the difference between the stored row and this one, in the same transaction: `stored`
   * must count the row as the database holds it (undefined is checked against the table, so a caller that did not load
   * it cannot count an action twice). Its counter changes are summed into `tally`, which writeCounts writes once for the
   * transaction (actions moving between the same keys cost one statement per key, not two per action), the rate's
   * minutes likewise.
   */
  writeState(write: ActionRowWrite, tally: CounterTally): void {
    const { state, timeline, stored, written } = write;
    if (write.writtenSeq !== undefined) {
      this.writeRemembered(write, tally, undefined);
      return;
    }
    this.countChange(stored ?? this.loadCounted(state.action_id), state, tally);
    const json = JSON.stringify(state);
    if (written === undefined)
      this.sql.upsertAction().run(state.action_id, ...actionColumns.map(([, value]) => value(state, timeline)), json);
    else this.updateChanged(state, timeline, written, json);
  }

  /**
   * writeState for a writer that remembers the rows it wrote (the writer thread's JournalWriter), answering the column
   * values written. A row named by `writtenSeq` is compared against `remembered` when that is the same version of it
   * (the same seq: each write of a row moves its last_seq), else against the row the table holds; the counters move
   * from the same row.
   */
  writeRemembered(write: ActionRowWrite, tally: CounterTally, remembered: WrittenRow | undefined): ActionColumnValue[] {
    const { state, timeline, stored, written, writtenSeq } = write;
    const values = actionColumnValues(state, timeline);
    const json = JSON.stringify(state);
    if (writtenSeq === undefined) {
      this.countChange(stored ?? this.loadCounted(state.action_id), state, tally);
      if (written === undefined) this.sql.upsertAction().run(state.action_id, ...values, json);
      else this.updateColumns(state.action_id, values, actionColumnValues(written.state, written.timeline), json);
      return values;
    }
    const before =
      remembered !== undefined && remembered.lastSeq === writtenSeq
        ? remembered.values
        : this.sql.loadColumns().get(state.action_id);
    if (before === undefined) throw notWhereWritten(state.action_id);
    this.countChange(storedCountsOfColumns(countedColumnsOf(before)), state, tally);
    this.updateColumns(state.action_id, values, before, json);
    return values;
  }

  /**
   * An UPDATE of the columns that differ from the row as this connection last wrote it (`before`), by one statement
   * per column set: SQLite maintains an index only when its columns are assigned, and most events move none of the
   * action table's indexed columns — only `state`, `stage` and the positions.
   */
  private updateChanged(
    state: ActionState,
    timeline: ActionTimeline,
    written: { readonly state: ActionState; readonly timeline: ActionTimeline },
    json: string,
  ): void {
    const names: string[] = [];
    const values: unknown[] = [];
    for (const [name, value] of actionColumns) {
      const now = value(state, timeline);
      if (now === value(written.state, written.timeline)) continue;
      names.push(name);
      values.push(now);
    }
    this.runUpdate(state.action_id, names, values, json);
  }

  /** updateChanged over column values (actionColumns' order): those in `values` that differ from `before`. */
  private updateColumns(
    actionId: string,
    values: readonly ActionColumnValue[],
    before: readonly ActionColumnValue[],
    json: string,
  ): void {
    const names: string[] = [];
    const changed: ActionColumnValue[] = [];
    for (let i = 0; i < values.length; i += 1) {
      const now = values[i] as ActionColumnValue;
      if (now === before[i]) continue;
      names.push(actionColumnNames[i] as string);
      changed.push(now);
    }
    this.runUpdate(actionId, names, changed, json);
  }

  private runUpdate(actionId: string, names: readonly string[], values: readonly unknown[], json: string): void {
    const key = names.join(',');
    let statement = this.updates.get(key);
    if (statement === undefined) {
      if (this.updates.size >= actionUpdateStatementsMax) this.updates.clear();
      const set = [...names, 'state'].map((name) => `${name} = ?`).join(', ');
      statement = this.db.prepare(`UPDATE actions SET ${set} WHERE action_id = ?`);
      this.updates.set(key, statement);
    }
    const info = statement.run(...values, json, actionId);
    if (info.changes !== 1) throw notWhereWritten(actionId);
  }
}

function notWhereWritten(actionId: string): Error {
  return new Error(`the actions row of ${actionId} was not where this connection last wrote it`);
}

/** The columns writeState's counters read when the caller had no stored state. */
interface CountedRowColumns {
  session_id: string | null;
  phase: string | null;
  outcome: string | null;
  code: string | null;
  decision: string | null;
  dispatch_seq: number | null;
  recorded: number;
  updated_at_ms: number;
}

const minuteKeyValues = `@minute, coalesce(@phase, ''), @outcome, coalesce(@code, ''), coalesce(@decision, ''),
  @dispatched, @in_flight`;

/**
 * The status counters of migration 011 ('' stands for null in their keys). A counter row at 0 stays (the keys are a
 * closed, small set); a minute row at 0 stays until pruned, and readers skip both.
 */
function counterStatements(db: Database) {
  return {
    readCounters: lazy<Statement<[], CounterRow>>(db, readCountersSql),
    readMinutes: lazy<Statement<[], MinuteRow>>(
      db,
      `
      SELECT minute, ${counterKeyColumns}, in_flight, n FROM outcome_minutes
      WHERE n > 0 AND minute > (SELECT max(minute) FROM outcome_minutes WHERE n > 0) - ${rateBuckets}`,
    ),
    bumpCounter: lazy<Statement<[CounterKey & { n: number }]>>(
      db,
      `
      INSERT INTO action_counters (phase, outcome, code, decision, dispatched, in_flight, n)
      VALUES (coalesce(@phase, ''), coalesce(@outcome, ''), coalesce(@code, ''), coalesce(@decision, ''),
        @dispatched, @in_flight, @n)
      ON CONFLICT (phase, outcome, code, decision, dispatched, in_flight) DO UPDATE SET n = n + excluded.n`,
    ),
    bumpMinute: lazy<Statement<[CounterKey & { minute: number; n: number }]>>(
      db,
      `
      INSERT INTO outcome_minutes (minute, phase, outcome, code, decision, dispatched, in_flight, n)
      VALUES (${minuteKeyValues}, @n)
      ON CONFLICT (minute, phase, outcome, code, decision, dispatched, in_flight) DO UPDATE SET n = n + excluded.n`,
    ),
    dropMinute: lazy<Statement<[CounterKey & { minute: number; n: number }]>>(
      db,
      `
      UPDATE outcome_minutes SET n = max(n - @n, 0)
      WHERE (minute, phase, outcome, code, decision, dispatched, in_flight) = (${minuteKeyValues}) AND n > 0`,
    ),
    pruneMinutes: lazy<Statement<[number]>>(db, `DELETE FROM outcome_minutes WHERE minute <= ?`),
    // Migration 017's session counters: one row per session id an action names, moved like action_counters.
    bumpSession: lazy<Statement<[{ session_id: string; calls: number; pending: number }]>>(
      db,
      `
      INSERT INTO session_counters (session_id, calls, pending) VALUES (@session_id, @calls, @pending)
      ON CONFLICT (session_id) DO UPDATE SET calls = calls + excluded.calls, pending = pending + excluded.pending`,
    ),
    loadCounted: lazy<Statement<[string], CountedRowColumns>>(
      db,
      `SELECT session_id, phase, outcome, code, decision, dispatch_seq, recorded, updated_at_ms FROM actions
      WHERE action_id = ?`,
    ),
  };
}

/**
 * Prepared on first use: a read-only reader (postern status) may open a database an older broker
 * wrote, whose tables lack the columns the write statements name.
 */
function lazy<S>(db: Database, sql: string, prepared: (statement: Statement) => unknown = (s) => s): () => S {
  let statement: S | undefined;
  return () => (statement ??= prepared(db.prepare(sql)) as S);
}

function flag(value: boolean): number {
  return value ? 1 : 0;
}

/** Distinct column sets updateChanged keeps statements for; a handful occur in practice. */
const actionUpdateStatementsMax = 256;

/**
 * The actions table's columns besides the key and `state` (the JSON of the whole state), each read from the state and
 * the action list's timeline: the one list the upsert and updateChanged bind from.
 */
type ActionColumn = readonly [string, (s: ActionState, t: ActionTimeline) => ActionColumnValue];
const actionColumns: readonly ActionColumn[] = [
  ['session_id', (s) => s.session_id],
  ['ticket', (s) => s.ticket],
  ['lane', (s) => s.lane],
  ['channel', (s) => s.channel],
  ['target', (s) => s.target],
  ['target_name', (s) => splitActionTarget(s.target).name],
  ['request_fingerprint', (s) => s.request_fingerprint],
  ['approval', (s) => s.approval],
  ['idempotent', (s) => flag(s.idempotent)],
  ['stage', (s) => s.stage],
  ['decision', (s) => s.decision],
  ['dispatch_evidence', (s) => s.dispatch_evidence],
  ['dispatch_seq', (s) => s.dispatch_seq],
  ['outcome', (s) => s.outcome],
  ['phase', (s) => s.phase],
  ['retry', (s) => s.retry],
  ['code', (s) => s.code],
  ['effect', (s) => s.effect],
  ['outcome_basis', (s) => s.outcome_basis],
  ['source', (s) => s.source],
  ['retry_after_ms', (s) => s.retry_after_ms],
  ['caller_disposition', (s) => s.caller_disposition],
  ['recorded', (s) => flag(s.recorded)],
  ['result_id', (s) => s.result_id],
  ['result_digest', (s) => s.result_digest],
  ['first_seq', (s) => s.first_seq],
  ['last_seq', (s) => s.last_seq],
  ['accepted_at_ms', (s) => s.accepted_at_ms],
  ['updated_at_ms', (s) => s.updated_at_ms],
  ['decided_by', (_, t) => t.decided_by],
  ['decided_at_ms', (_, t) => t.decided_at_ms],
  ['decided_seq', (_, t) => t.decided_seq],
  ['dispatched_at_ms', (_, t) => t.dispatched_at_ms],
  ['settled_at_ms', (_, t) => t.settled_at_ms],
  ['resolved_at_ms', (_, t) => t.resolved_at_ms],
];
const actionColumnNames = actionColumns.map(([name]) => name);

/** An actions row's column values (actionColumns' order) for a state and its timeline. */
function actionColumnValues(state: ActionState, timeline: ActionTimeline): ActionColumnValue[] {
  const values: ActionColumnValue[] = new Array<ActionColumnValue>(actionColumns.length);
  for (let i = 0; i < actionColumns.length; i += 1) values[i] = (actionColumns[i] as ActionColumn)[1](state, timeline);
  return values;
}

/** The counted form of a row as stored (countedAction and sessionCounted of its columns). */
function storedCountsOfColumns(row: CountedRowColumns): StoredCounts {
  return { action: countedAction({ ...row, recorded: row.recorded === 1 }), session: sessionCounted(row) };
}

const column = (name: string): number => actionColumnNames.indexOf(name);
const countedColumnIndexes = {
  session_id: column('session_id'),
  phase: column('phase'),
  outcome: column('outcome'),
  code: column('code'),
  decision: column('decision'),
  dispatch_seq: column('dispatch_seq'),
  recorded: column('recorded'),
  updated_at_ms: column('updated_at_ms'),
};

/** What loadCounted reads of a row, from its column values (actionColumns' order). */
function countedColumnsOf(values: readonly ActionColumnValue[]): CountedRowColumns {
  const at = (i: number): ActionColumnValue => values[i] as ActionColumnValue;
  const c = countedColumnIndexes;
  return {
    session_id: at(c.session_id) as string | null,
    phase: at(c.phase) as string | null,
    outcome: at(c.outcome) as string | null,
    code: at(c.code) as string | null,
    decision: at(c.decision) as string | null,
    dispatch_seq: at(c.dispatch_seq) as number | null,
    recorded: at(c.recorded) as number,
    updated_at_ms: at(c.updated_at_ms) as number,
  };
}

/** An actions row's column values, in actionColumns' order (with `.raw()`: an array). */
const loadColumnsSql = `SELECT ${actionColumnNames.join(', ')} FROM actions WHERE action_id = ?`;
/**
 * The sessions the journal holds in memory, read once as it opens (openingSessions): every one not ended with its
 * process (one pass over the table) and the newest `?` of those that ended, walked from the end of
 * sessions_by_first_seq (migration 018) and stopped at the limit, with no sort.
 */
export const openingSessionsSql = `
  SELECT state FROM sessions WHERE status != 'ended'
  UNION ALL
  SELECT state FROM (SELECT state FROM sessions WHERE status = 'ended' ORDER BY first_seq DESC LIMIT ?)`;

const upsertActionSql = `
  INSERT INTO actions (action_id, ${actionColumnNames.join(', ')}, state)
  VALUES (${['action_id', ...actionColumnNames, 'state'].map(() => '?').join(', ')})
  ON CONFLICT (action_id) DO UPDATE SET
    ${[...actionColumnNames, 'state'].map((name) => `${name} = excluded.${name}`).join(', ')}`;

/** How many actions the current-state table holds, and how many are in flight or unknown. */
export interface ActionCounts {
  readonly total: number;
  readonly in_flight: number;
  readonly unknown: number;
}
