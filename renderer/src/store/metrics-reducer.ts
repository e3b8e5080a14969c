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
      return event.reply.ok
        ? { phase: 'ready', metrics: event.reply.value, error: null }
        : { ...view, phase: 'error', error: event.reply.error };
  }
}

/** The closed sets in lifecycle order. The renderer may import only types from the contract, so the
 *  order is spelled here; the `satisfies` and the checks below fail the build if a value is added. */
export const phaseOrder = [
  'validation',
  'credential_injection',
  'connection_setup',
  'remote_execution',
  'result_delivery',
] as const satisfies readonly Phase[];
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

export type Decided = Metrics['decisions'][number]['decision'];

/** The decisions that close an action before dispatch, in the order the view lists them, and their words. */
export const decisionOrder = [
  'rejected',
  'expired',
  'cancelled',
  'withdrawn',
  'restarted',
] as const satisfies readonly Decided[];
export const decisionsListed: Exhaustive<Exclude<Decided, (typeof decisionOrder)[number]>> = true;
export const decisionMeaning: Readonly<Record<Decided, string>> = {
  rejected: 'a person rejected the card',
  expired: 'the approval window closed with no decision',
  cancelled: 'a person cancelled it, or its session was revoked',
  withdrawn: 'the caller cancelled, disconnected or ran out of time before anything was sent',
  restarted: 'the broker restarted while it waited (for a person or its lane); recovery closed it, nothing was sent',
};

/** Every decision with its count (0 where none), so the breakdown's rows do not move as counts arrive. */
export function decisionRows(decisions: Metrics['decisions']): Array<{ decision: Decided; count: number }> {
  return decisionOrder.map((decision) => ({
    decision,
    count: decisions.find((d) => d.decision === decision)?.count ?? 0,
  }));
}

/** One sparkline: its key for the test id and class, the counts, and the total over the window. */
export interface RateLine {
  key: string;
  label: string;
  counts: readonly number[];
  total: number;
}

/** The rate series for the view: outcomes first (lifecycle order), then the decisions, each with its total. */
export function rateLines(rate: Metrics['rate']): RateLine[] {
  const sum = (counts: readonly number[]) => counts.reduce((a, b) => a + b, 0);
  const line = (key: string, label: string, counts: readonly number[]): RateLine => ({
    key,
    label,
    counts,
    total: sum(counts),
  });
  const outcomes = outcomeOrder.flatMap((o) =>
    rate.by_outcome.filter((s) => s.outcome === o).map((s) => line(`outcome-${o}`, o, s.counts)),
  );
  const decided = decisionOrder.flatMap((d) =>
    rate.by_decision.filter((s) => s.decision === d).map((s) => line(`decision-${d}`, `${d} (decision)`, s.counts)),
  );
  return [...outcomes, ...decided];
}

/**
 * The SVG polyline points of a sparkline `width` × `height` (y grows downward): one point per
 * bucket, scaled to the series' own peak so a quiet outcome still shows its shape; a flat zero line
 * sits on the bottom edge.
 */
export function sparklinePoints(counts: readonly number[], width: number, height: number): string {
  if (counts.length === 0) return '';
  const peak = Math.max(1, ...counts);
  const step = counts.length === 1 ? 0 : width / (counts.length - 1);
  return counts.map((n, i) => `${round(i * step)},${round(height - (Math.max(0, n) / peak) * height)}`).join(' ');
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
