import type { BrokerApi, Outcome, Phase, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

export type Metrics = BrokerApi['metrics']['output'];

export interface MetricsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** As last read (kept, as stale, beside a refresh error). */
  metrics: Metrics | null;
  error: ReplyError | null;
}

export type MetricsEvent = { type: 'requested' } | { type: 'received'; reply: Reply<Metrics> };

export const initialMetricsView: MetricsView = { phase: 'idle', metrics: null, error: null };

/** Pure: the next view from the current one and one event. */
export function metricsReducer(view: MetricsView, event: MetricsEvent): MetricsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok ? { phase: 'ready', metrics: event.reply.value, error: null } : { ...view, phase: 'error', error: event.reply.error };
  }
}

/** The closed sets in lifecycle order. The renderer may import only types from the contract, so the
 *  order is spelled here; the `satisfies` and the checks below fail the build if a value is added. */
export const phaseOrder = ['validation', 'credential_injection', 'connection_setup', 'remote_execution', 'result_delivery'] as const satisfies readonly Phase[];
export const outcomeOrder = ['not_attempted', 'rejected', 'committed', 'unknown'] as const satisfies readonly Outcome[];
type Exhaustive<Missing> = [Missing] extends [never] ? true : never;
export const phasesListed: Exhaustive<Exclude<Phase, (typeof phaseOrder)[number]>> = true;
export const outcomesListed: Exhaustive<Exclude<Outcome, (typeof outcomeOrder)[number]>> = true;

export interface PhaseOutcomeGrid {
  phases: readonly Phase[];
  outcomes: readonly Outcome[];
  /** count[phase][outcome], 0 where no action is. */
  count: Record<Phase, Record<Outcome, number>>;
  /** The largest cell, the scale for the bars (at least 1). */
  max: number;
  settled: number;
}

/** Pure: the phase × outcome table from the metrics, every cell present (a pair is never merged into a "failures" total). */
export function phaseOutcomeGrid(rows: Metrics['by_phase_outcome']): PhaseOutcomeGrid {
  const zeroRow = (): Record<Outcome, number> => ({ not_attempted: 0, rejected: 0, committed: 0, unknown: 0 });
  const count = Object.fromEntries(phaseOrder.map((p) => [p, zeroRow()])) as Record<Phase, Record<Outcome, number>>;
  let max = 1;
  let settled = 0;
  for (const row of rows) {
    const cell = count[row.phase][row.outcome] + row.count;
    count[row.phase][row.outcome] = cell;
    max = Math.max(max, cell);
    settled += row.count;
  }
  return { phases: phaseOrder, outcomes: outcomeOrder, count, max, settled };
}

/** A bar's width as a percentage of the largest cell; a non-zero count always shows at least a sliver. */
export function barPercent(count: number, max: number): number {
  if (count <= 0) return 0;
  return Math.max(2, Math.round((count / Math.max(1, max)) * 100));
}
