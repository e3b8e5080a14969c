/**
 * The journal's reads a snapshot needs (`status` with no broker, the configuration's card with none): SQL text only,
 * shared by the journal's own store (journal-store.ts) and the read-only snapshot (read-snapshot.ts). Apart from the
 * store, so a snapshot loads none of the contract's schemas or the fold (issue 18's cold start).
 */

/**
 * An actions row dispatched whose outcome is not recorded yet: running (its outcome says unknown provisionally from
 * DISPATCH_STARTED on), or, with no broker running the journal, cut or crashed. SQL over the actions table's columns.
 */
export const dispatchedUnrecordedSql = '(recorded = 0 AND dispatch_seq IS NOT NULL)';
/**
 * An actions row in flight, the counters' in_flight (countedAction in broker/core/action-counters.ts, the same test in
 * TypeScript): open before dispatch (nothing classified it yet), or dispatched and not recorded. What recovery closes.
 * Migrations keep their own copies: this may change meaning, and a migration's step may not.
 */
export const inFlightSql = `(recorded = 0 AND (outcome IS NULL OR dispatch_seq IS NOT NULL))`;

/** The last event's seq (events is AUTOINCREMENT: the sequence survives a pruned tail). Row: `{ seq }`. */
export const lastSeqSql = `SELECT seq FROM sqlite_sequence WHERE name = 'events'`;
/** Row: `{ n }`. */
export const countEventsSql = `SELECT count(*) AS n FROM events`;
/** The audit tree's size (the events appended, from schema 4) and frontier. Row: `{ size, frontier }`. */
export const readTreeSql = `SELECT size, frontier FROM audit_tree WHERE id = 1`;

/** A counter key's columns as the fold's CounterKey reads them ('' stands for null in the stored keys). */
export const counterKeyColumns = `nullif(phase, '') AS phase, nullif(outcome, '') AS outcome, nullif(code, '') AS code,
  nullif(decision, '') AS decision, dispatched`;
/** The status counters of migration 011 that are not at 0. Rows: CounterRow (broker/core/action-counters.ts). */
export const readCountersSql = `SELECT ${counterKeyColumns}, in_flight, n FROM action_counters WHERE n <> 0`;
