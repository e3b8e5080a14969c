import { rateBucketMs, rateBuckets, type OutcomeCountRow } from './metrics.js';

/**
 * The columns of one action row that `status` and `metrics` count by. The journal keeps a count per
 * distinct value of these (and a per-minute count for the rate) beside the actions table, moved by
 * the difference between an action's old and new row in the transaction that rewrites the row, so
 * reading them costs the same for ten actions as for a million.
 */
export interface CounterKey {
  readonly phase: string | null;
  readonly outcome: string | null;
  readonly code: string | null;
  readonly decision: string | null;
  /** 1 once the action crossed the dispatch boundary (dispatch_seq set). */
  readonly dispatched: 0 | 1;
  /** 1 while nothing recorded a classification: open before dispatch, or dispatched and unsettled. */
  readonly in_flight: 0 | 1;
}

/** What one action contributes: its key, and the minute it last changed once it is classified. */
export interface CountedAction {
  readonly key: CounterKey;
  /**
   * updated_at_ms / 60 000 (SQLite's integer division), null while the outcome is null. A dispatched action holds
   * outcome unknown provisionally until it settles: its minute row carries the key's in_flight (schema 22), which the
   * rate never counts as an outcome; it moves the rate's hour only.
   */
  readonly minute: number | null;
}

export interface CounterChange {
  readonly key: CounterKey;
  readonly n: 1 | -1;
}

export interface MinuteChange {
  readonly minute: number;
  readonly key: CounterKey;
  readonly n: 1 | -1;
}

/** The writes that keep the counters equal to the table; both empty when nothing counted changed. */
export interface CounterDelta {
  readonly counts: readonly CounterChange[];
  readonly minutes: readonly MinuteChange[];
}

/** A stored counter row. */
export interface CounterRow extends CounterKey {
  readonly n: number;
}

export interface MinuteRow extends CounterKey {
  readonly minute: number;
  readonly n: number;
}

/** The fields of an ActionState (or the columns of its row) the counters read. */
export interface CountedFields {
  readonly phase: string | null;
  readonly outcome: string | null;
  readonly code: string | null;
  readonly decision: string | null;
  readonly dispatch_seq: number | null;
  readonly recorded: boolean;
  readonly updated_at_ms: number;
}

/** The same expressions as the actions table's columns give (journal-store's former scan queries). */
export function countedAction(state: CountedFields): CountedAction {
  const dispatched = state.dispatch_seq !== null;
  return {
    key: {
      phase: state.phase,
      outcome: state.outcome,
      code: state.code,
      decision: state.decision,
      dispatched: dispatched ? 1 : 0,
      in_flight: !state.recorded && (state.outcome === null || dispatched) ? 1 : 0,
    },
    minute: state.outcome === null ? null : Math.trunc(state.updated_at_ms / rateBucketMs),
  };
}

/**
 * The counter writes for one action row going from `before` (undefined: no row yet) to `after`.
 * The rate's minute counts only classified actions, by their whole key (in_flight too: settling moves an action from
 * its in-flight minute row to a counted one); a key already counted the same way is left alone.
 */
export function counterDelta(before: CountedAction | undefined, after: CountedAction): CounterDelta {
  const counts: CounterChange[] = [];
  const minutes: MinuteChange[] = [];
  const sameKey = before !== undefined && sameCounterKey(before.key, after.key);
  if (!sameKey) {
    if (before !== undefined) counts.push({ key: before.key, n: -1 });
    counts.push({ key: after.key, n: 1 });
  }
  const sameMinute = before !== undefined && before.minute === after.minute && sameCounterKey(before.key, after.key);
  if (!sameMinute) {
    if (before?.minute !== undefined && before.minute !== null)
      minutes.push({ minute: before.minute, key: before.key, n: -1 });
    if (after.minute !== null) minutes.push({ minute: after.minute, key: after.key, n: 1 });
  }
  return { counts, minutes };
}

/**
 * What `status` shows: every action, those in flight (open before dispatch, or dispatched and not settled), and those
 * recorded with an unknown outcome. A dispatched action's row says unknown from DISPATCH_STARTED on, but while it runs
 * it is in flight, not an unknown outcome: each action is in at most one of the two.
 */
export function actionCountsOf(counters: readonly CounterRow[]): { total: number; in_flight: number; unknown: number } {
  // The resting count with a broker running: a dispatched action with no outcome recorded is running, so in flight.
  const { total, in_flight, unknown, dispatched_unrecorded: running } = restingActionCountsOf(counters);
  return { total, in_flight: in_flight + running, unknown: unknown - running };
}

/** status's counts read from the journal file while no broker runs it (restingActionCountsOf). */
export interface RestingActionCounts {
  readonly total: number;
  /** Open before dispatch (waiting for a person or in a lane): the next start closes them not_attempted. */
  readonly in_flight: number;
  /** Recorded unknown, and the `dispatched_unrecorded` ones. */
  readonly unknown: number;
  /** Of `unknown`: dispatched with no outcome recorded — cut or crashed; the next start records BROKER_RESTARTED. */
  readonly dispatched_unrecorded: number;
}

/**
 * What `status` shows read from the journal file with no broker running it (DESIGN §2): a dispatched action with no
 * outcome recorded is not running — nothing is — so it is not in flight: its outcome is unknown (the bytes may have
 * left), as the next start's recovery will record (BROKER_RESTARTED). Counted unknown, and apart in
 * `dispatched_unrecorded` so status can say why. The same counters as actionCountsOf: O(1) in journal size.
 */
export function restingActionCountsOf(counters: readonly CounterRow[]): RestingActionCounts {
  let total = 0;
  let inFlight = 0;
  let unknown = 0;
  let unrecorded = 0;
  for (const row of counters) {
    total += row.n;
    if (row.in_flight === 1 && row.dispatched === 1) unrecorded += row.n;
    else if (row.in_flight === 1) inFlight += row.n;
    else if (row.outcome === 'unknown') unknown += row.n;
  }
  return { total, in_flight: inFlight, unknown: unknown + unrecorded, dispatched_unrecorded: unrecorded };
}

/**
 * The rows foldMetrics reads, as the scan over the actions table grouped them: per rate key, one row per minute within
 * the hour up to the newest minute row (the newest change of an action with an outcome, settled or running), and one
 * (minute null) for the rest. `minutes` may hold older minutes not yet pruned; they count with the rest. The actions
 * in flight with an outcome (dispatched, not settled: their row says unknown provisionally) come out apart, in_flight: 1
 * and open: per minute within the hour, and the rest in a row of their own. foldRate ends the hour at the newest minute
 * of all these rows, a running action's too (its dispatch moves the hour's end), and counts only the settled ones.
 */
export function outcomeRowsOf(counters: readonly CounterRow[], minutes: readonly MinuteRow[]): OutcomeCountRow[] {
  // Per rate key: the settled (or open before dispatch, outcome null) ones, and the dispatched ones not settled yet
  // (their row already says unknown): open, never counted as an outcome.
  const settled = new Map<string, { key: CounterKey; n: number }>();
  const inFlight = new Map<string, { key: CounterKey; n: number }>();
  for (const row of counters) {
    if (row.n === 0) continue;
    const groups = row.in_flight === 1 && row.outcome !== null ? inFlight : settled;
    const id = rateKeyId(row);
    const group = groups.get(id) ?? { key: row, n: 0 };
    group.n += row.n;
    groups.set(id, group);
  }
  let newest: number | null = null;
  for (const row of minutes) if (row.n > 0) newest = Math.max(newest ?? row.minute, row.minute);
  const rows: OutcomeCountRow[] = [];
  for (const row of minutes) {
    if (newest === null || row.n <= 0 || row.minute <= newest - rateBuckets) continue;
    const running = row.in_flight === 1;
    const group = (running ? inFlight : settled).get(rateKeyId(row));
    if (group !== undefined) group.n -= row.n;
    rows.push(running ? { ...outcomeRow(row, row.minute, row.n), in_flight: 1 } : outcomeRow(row, row.minute, row.n));
  }
  for (const { key, n } of settled.values()) if (n !== 0) rows.push(outcomeRow(key, null, n));
  for (const { key, n } of inFlight.values()) if (n !== 0) rows.push({ ...outcomeRow(key, null, n), in_flight: 1 });
  return rows;
}

function outcomeRow(key: CounterKey, minute: number | null, n: number): OutcomeCountRow {
  const { phase, outcome, code, decision, dispatched } = key;
  return { phase, outcome, code, decision, dispatched, minute, n };
}

function sameRateKey(a: CounterKey, b: CounterKey): boolean {
  return (
    a.phase === b.phase &&
    a.outcome === b.outcome &&
    a.code === b.code &&
    a.decision === b.decision &&
    a.dispatched === b.dispatched
  );
}

function sameCounterKey(a: CounterKey, b: CounterKey): boolean {
  return sameRateKey(a, b) && a.in_flight === b.in_flight;
}

/** One string per action_counters row (the rate key and in_flight), to sum a transaction's changes by row (an
 * outcome_minutes row is this and its minute). */
export function counterKeyId(key: CounterKey): string {
  return JSON.stringify([key.phase, key.outcome, key.code, key.decision, key.dispatched, key.in_flight]);
}

/** A rate key: the counter key without in_flight, which a key's in-flight and settled actions share. */
export function rateKeyId(key: CounterKey): string {
  return JSON.stringify([key.phase, key.outcome, key.code, key.decision, key.dispatched]);
}
