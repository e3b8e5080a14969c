import type { Outcome, Phase } from '../contract/index.js';

/** One group of actions by their current classification (a row of the journal's current state). */
export interface OutcomeCountRow {
  readonly phase: string | null;
  readonly outcome: string | null;
  readonly code: string | null;
  readonly n: number;
}

export interface ActionMetrics {
  /** Every (phase, outcome) pair that has actions, with its count: connection_setup/not_attempted and remote_execution/unknown are different alarms. */
  readonly by_phase_outcome: Array<{ phase: Phase; outcome: Outcome; count: number }>;
  /** Counts by error code (null code = success, not listed). */
  readonly by_code: Array<{ code: string; count: number }>;
  /** Actions with no classification yet (waiting in a lane, or in flight). */
  readonly open: number;
  readonly total: number;
}

/**
 * Folds the journal's (phase, outcome, code) groups into the metrics view (DESIGN §5): phase and
 * outcome are counted as pairs and codes separately — never one "failures" number. Sorted for a
 * stable display: phases in lifecycle order, then outcomes, then codes by count.
 */
export function foldMetrics(rows: readonly OutcomeCountRow[]): ActionMetrics {
  const pairs = new Map<string, { phase: Phase; outcome: Outcome; count: number }>();
  const codes = new Map<string, number>();
  let open = 0;
  let total = 0;
  for (const row of rows) {
    total += row.n;
    if (row.outcome === null || row.phase === null) {
      open += row.n;
      continue;
    }
    const key = `${row.phase}/${row.outcome}`;
    const pair = pairs.get(key) ?? { phase: row.phase as Phase, outcome: row.outcome as Outcome, count: 0 };
    pair.count += row.n;
    pairs.set(key, pair);
    if (row.code !== null) codes.set(row.code, (codes.get(row.code) ?? 0) + row.n);
  }
  return {
    by_phase_outcome: [...pairs.values()].sort((a, b) => rank(phaseOrder, a.phase) - rank(phaseOrder, b.phase) || rank(outcomeOrder, a.outcome) - rank(outcomeOrder, b.outcome)),
    by_code: [...codes.entries()].map(([code, count]) => ({ code, count })).sort((a, b) => b.count - a.count || (a.code < b.code ? -1 : 1)),
    open,
    total,
  };
}

const phaseOrder: readonly string[] = ['validation', 'credential_injection', 'connection_setup', 'remote_execution', 'result_delivery'];
const outcomeOrder: readonly string[] = ['not_attempted', 'rejected', 'committed', 'unknown'];

function rank(order: readonly string[], value: string): number {
  const i = order.indexOf(value);
  return i < 0 ? order.length : i;
}
