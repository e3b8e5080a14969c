import type { Decision, Outcome, Phase } from '../contract/index.js';

/**
 * One group of actions by their current classification (a row of the journal's current state). The
 * optional columns come from the journal's query since issue #16; rows without them (older callers,
 * tests) count as dispatched-or-not-known, never as a person's decision.
 */
export interface OutcomeCountRow {
  readonly phase: string | null;
  readonly outcome: string | null;
  readonly code: string | null;
  readonly n: number;
  /** The ticket's decision (approved, rejected, expired, cancelled) or null. */
  readonly decision?: string | null;
  /** 1 when the action crossed the dispatch boundary, 0 when it never did. */
  readonly dispatched?: number | null;
  /** The minute (at_ms / 60 000) the action last changed, only within the rate window (see rateBuckets); else null. */
  readonly minute?: number | null;
  /** 1: dispatched and not settled yet (its outcome says unknown until it settles): open, not an outcome. */
  readonly in_flight?: number;
}

/**
 * How an action was closed before dispatch by a decision rather than by a failure of a phase: a
 * person's rejection or cancel (a session revocation cancels too), an approval window that ran out,
 * or the caller withdrawing (cancel, disconnect, deadline, its process gone) before anything was sent;
 * or by the broker restarting under it (recovery's BROKER_RESTARTED, not_attempted: a card that waited for
 * a person, a ticket that waited for its lane — no phase failed, nothing was injected or sent).
 */
export const ClosedBeforeDispatch = {
  rejected: 'rejected',
  expired: 'expired',
  cancelled: 'cancelled',
  withdrawn: 'withdrawn',
  restarted: 'restarted',
} as const;
export type ClosedBeforeDispatch = keyof typeof ClosedBeforeDispatch;

/**
 * The rate window: one bucket per minute, the hour ending with the newest minute an action with an outcome last changed
 * in — settled, or running (a dispatched action's row says unknown provisionally: its dispatch, and each change while it
 * runs, moves the hour's end, though the rate counts it only once it settles). Event time, never a reader's clock.
 */
export const rateBucketMs = 60_000;
export const rateBuckets = 60;

export interface OutcomeRate {
  /** The end of the window: the end of that newest minute, a running action's too; null when no action has an outcome. */
  readonly until_ms: number | null;
  readonly bucket_ms: number;
  /** counts[i] covers [until_ms - (buckets - i) × bucket_ms, until_ms - (buckets - i - 1) × bucket_ms). */
  readonly by_outcome: Array<{ outcome: Outcome; counts: number[] }>;
  readonly by_decision: Array<{ decision: ClosedBeforeDispatch; counts: number[] }>;
}

export interface ActionMetrics {
  /** Every (phase, outcome) pair that has actions, with its count: connection_setup/not_attempted and remote_execution/unknown are different alarms. */
  readonly by_phase_outcome: Array<{ phase: Phase; outcome: Outcome; count: number }>;
  /** Counts by error code (null code = success, not listed); closed-before-dispatch decisions are in `decisions`, not here. */
  readonly by_code: Array<{ code: string; count: number }>;
  /** Actions closed before dispatch by a decision or a restart: never counted as a failure of a phase. */
  readonly decisions: Array<{ decision: ClosedBeforeDispatch; count: number }>;
  /** Actions not settled or closed yet: waiting (in a lane, for a person), or in flight (on their way or running). */
  readonly open: number;
  readonly total: number;
  readonly rate: OutcomeRate;
}

/**
 * The codes of the caller's own stop (cancel_action, a client's notifications/cancelled, a disconnect, its wait).
 * Before dispatch the queue closes the ticket for it with a CANCELLED whose actor is the agent and whose
 * classification carries one of these (approval-queue callerStopped); a CANCELLED by anyone else never does
 * (a person's: APPROVAL_DENIED, a session revoked: SESSION_REVOKED) — validateNewEvent refuses the mix.
 */
export const callerStopCodes: ReadonlySet<string> = new Set(['CALLER_CANCELLED', 'CALLER_DEADLINE_EXCEEDED']);
/**
 * The code of a CANCELLED the broker wrote because the session's process is gone (the session sweeper): nobody
 * cancelled, the caller went away — withdrawn. Tickets closed so before this code existed carry SESSION_REVOKED and
 * stay counted as cancelled: the counters keep no actor or reason that could tell them apart.
 */
export const callerGoneCodes: ReadonlySet<string> = new Set(['SESSION_ENDED']);
/**
 * The code recovery closes an action with when the broker stopped under it (broker/core classify-restart.ts). Its
 * not_attempted is proven before dispatch (a quarantined journal's is unknown, an alarm, counted under its phase).
 */
const restartCode = 'BROKER_RESTARTED';
const terminalDecisions: ReadonlySet<string> = new Set<Decision>(['rejected', 'expired', 'cancelled']);

/**
 * Which decision closed an undispatched action, or null when a phase failed (or it ran). The ticket's
 * decision wins over the code — a rejection's APPROVAL_DENIED is the person's word, not a gate failing
 * in credential_injection — except that a CANCELLED the caller wrote for its own stop, or the broker wrote
 * because the caller's process is gone, is the caller's withdrawal, not a person's cancel: the counters keep
 * no actor, and its code is what says who cancelled (callerStopCodes, callerGoneCodes). Read from the stored
 * counter keys, so existing counts need no rewrite.
 */
export function closedBeforeDispatch(row: OutcomeCountRow): ClosedBeforeDispatch | null {
  if (row.outcome !== 'not_attempted' || row.dispatched === 1) return null;
  const decision = row.decision ?? null;
  const callerStop = row.code !== null && callerStopCodes.has(row.code);
  const callerGone = row.code !== null && callerGoneCodes.has(row.code);
  // A CANCELLED is refused after DISPATCH_STARTED (project.ts): a cancelled row is undispatched by itself.
  if (decision === 'cancelled' && (callerStop || callerGone)) return 'withdrawn';
  if (decision !== null && terminalDecisions.has(decision)) return decision as ClosedBeforeDispatch;
  if (row.dispatched === 0 && callerStop) return 'withdrawn';
  // Its phase is where the record stopped (a waiting card's is credential_injection, DESIGN §3), yet nothing there
  // failed: the broker went away. Read from the stored code, so a journal's existing counts need no rewrite.
  if (row.code === restartCode) return 'restarted';
  return null;
}

/**
 * Folds the journal's groups into the metrics view (DESIGN §5): phase and outcome are counted as
 * pairs and codes separately — never one "failures" number — and decisions that closed an action
 * before dispatch apart from both. Sorted for a stable display: phases in lifecycle order, then
 * outcomes, then codes by count.
 */
export function foldMetrics(rows: readonly OutcomeCountRow[]): ActionMetrics {
  const pairs = new Map<string, { phase: Phase; outcome: Outcome; count: number }>();
  const codes = new Map<string, number>();
  const decisions = new Map<ClosedBeforeDispatch, number>();
  let open = 0;
  let total = 0;
  for (const row of rows) {
    total += row.n;
    if (row.in_flight === 1 || row.outcome === null || row.phase === null) {
      open += row.n;
      continue;
    }
    const decided = closedBeforeDispatch(row);
    if (decided !== null) {
      decisions.set(decided, (decisions.get(decided) ?? 0) + row.n);
      continue;
    }
    const key = `${row.phase}/${row.outcome}`;
    const pair = pairs.get(key) ?? { phase: row.phase as Phase, outcome: row.outcome as Outcome, count: 0 };
    pair.count += row.n;
    pairs.set(key, pair);
    if (row.code !== null) codes.set(row.code, (codes.get(row.code) ?? 0) + row.n);
  }
  return {
    // Every row the journal gives counts at least one action (outcomeRowsOf, scanOutcomeCounts), and a row in flight
    // makes no pair nor code: no pair or code is ever at zero (status-counters.test.ts, "a rate key whose actions").
    by_phase_outcome: [...pairs.values()].sort(
      (a, b) =>
        rank(phaseOrder, a.phase) - rank(phaseOrder, b.phase) ||
        rank(outcomeOrder, a.outcome) - rank(outcomeOrder, b.outcome),
    ),
    by_code: [...codes.entries()]
      .map(([code, count]) => ({ code, count }))
      .sort((a, b) => b.count - a.count || (a.code < b.code ? -1 : 1)),
    decisions: decisionOrder
      .filter((d) => decisions.has(d))
      .map((decision) => ({ decision, count: decisions.get(decision) ?? 0 })),
    open,
    total,
    rate: foldRate(rows),
  };
}

/**
 * Counts per minute for each outcome and each closing decision, over the rows the journal put in the window. The hour
 * ends with the newest minute of any row, an in-flight one's too (outcomeRowsOf, scanOutcomeCounts: the same end as the
 * journal's window); in-flight rows are counted in no series.
 */
function foldRate(rows: readonly OutcomeCountRow[]): OutcomeRate {
  let newest: number | null = null;
  for (const row of rows) {
    const minute = row.minute ?? null;
    if (minute !== null && row.outcome !== null) newest = Math.max(newest ?? minute, minute);
  }
  const byOutcome = new Map<Outcome, number[]>();
  const byDecision = new Map<ClosedBeforeDispatch, number[]>();
  if (newest === null) return { until_ms: null, bucket_ms: rateBucketMs, by_outcome: [], by_decision: [] };
  const first = newest - rateBuckets + 1;
  for (const row of rows) {
    if (row.minute === undefined || row.minute === null || row.outcome === null || row.minute < first) continue;
    // A running action's minute ends the hour (above) but is no outcome: it is counted once it settles.
    if (row.in_flight === 1) continue;
    const decided = closedBeforeDispatch(row);
    const series = decided !== null ? seriesOf(byDecision, decided) : seriesOf(byOutcome, row.outcome as Outcome);
    series[row.minute - first] = (series[row.minute - first] ?? 0) + row.n;
  }
  return {
    until_ms: (newest + 1) * rateBucketMs,
    bucket_ms: rateBucketMs,
    by_outcome: [...byOutcome.entries()]
      .map(([outcome, counts]) => ({ outcome, counts }))
      .sort((a, b) => rank(outcomeOrder, a.outcome) - rank(outcomeOrder, b.outcome)),
    by_decision: decisionOrder.flatMap((decision) => {
      const counts = byDecision.get(decision);
      return counts === undefined ? [] : [{ decision, counts }];
    }),
  };
}

function seriesOf<K>(map: Map<K, number[]>, key: K): number[] {
  let series = map.get(key);
  if (series === undefined) {
    series = new Array<number>(rateBuckets).fill(0);
    map.set(key, series);
  }
  return series;
}

const phaseOrder: readonly string[] = [
  'validation',
  'credential_injection',
  'connection_setup',
  'remote_execution',
  'result_delivery',
];
const outcomeOrder: readonly string[] = ['not_attempted', 'rejected', 'committed', 'unknown'];
const decisionOrder: readonly ClosedBeforeDispatch[] = ['rejected', 'expired', 'cancelled', 'withdrawn', 'restarted'];

function rank(order: readonly string[], value: string): number {
  const i = order.indexOf(value);
  return i < 0 ? order.length : i;
}
