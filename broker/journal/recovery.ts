import {
  actionStageOrder,
  restartJournalQuarantinedBasis,
  type ActionState,
  type NewEvent,
} from '../contract/index.js';
import { classifyRestart, type RecoveredJournal } from '../core/index.js';

/**
 * The event recovery appends at open for an action a previous run left open, or undefined when
 * the record already says what is known. The decision is core's classifyRestart; the journal
 * appends the event through the normal commit path, so applyEvent still guards it. `journal` is what the start found
 * before recovery: a quarantined journal claims no not_attempted (classify-restart.ts).
 */
export function recoveryEvent(
  state: ActionState,
  nowMs?: number,
  journal: RecoveredJournal = 'trusted',
): NewEvent | undefined {
  const classification = classifyRestart(state, nowMs, journal);
  if (classification === undefined) return undefined;
  const latest = state.dispatch_seq === null ? undefined : state.attempts.at(-1);
  return {
    kind: 'OUTCOME_RECORDED',
    action_id: state.action_id,
    payload: latest === undefined ? {} : { attempt: latest.n },
    classification,
  };
}

/** What an action's plaintext event headers establish (JournalStore.logFacts), seqs null where there is none. */
export interface LogFacts {
  readonly first_dispatch: number | null;
  readonly last_dispatch: number | null;
  /** The last event of a kind that must carry a classification (kindsRequiringClassification). */
  readonly last_classified: number | null;
  /** The action's last event, of any kind (null: it has none). */
  readonly last_seq: number | null;
  /** Whether a person abandoned it (an ABANDONED header): never undone by a later event. */
  readonly abandoned: boolean;
  /**
   * The outcome its last header naming one names (core eventOutcomeHeader, headers since journal schema 25): the
   * outcome its fold reads, as no later event changes it. Null where no header names one (none written since 25).
   */
  readonly outcome: string | null;
  /** The session, ticket and lane its admission's header (ACTION_ACCEPTED, its first) names; null without one. */
  readonly session_id: string | null;
  readonly ticket: number | null;
  readonly lane: string | null;
  /**
   * Whether the headers agree among themselves as the journal writes them: the first an ACTION_ACCEPTED and every later
   * one copying its session, ticket and lane (plan-unit's stamp). An inserted header that does not is a refutation.
   */
  readonly consistent: boolean;
}

/**
 * What the log holds that an action's row denies (Journal.onActionRowRefuted's `log_holds`):
 * - `DISPATCH_STARTED`: the row names no dispatch, or another first one, than the log's first DISPATCH_STARTED, or
 *   says what no dispatched action can (no outcome, or not_attempted, after a dispatch);
 * - `DISPATCH_STARTED_UNCLASSIFIED`: the row reads classified (recorded), or is gone, where the log's last
 *   DISPATCH_STARTED has no classified event after it: in flight when the broker stopped;
 * - `CLASSIFIED`: the row reads unclassified where the log classified the action after its last dispatch (or before any);
 * - `ADMISSION`: the row names another session, ticket or lane than the action's admission header, or the headers
 *   disagree among themselves (one inserted);
 * - `OUTCOME`: the row says another outcome than the last header naming one (since journal schema 25): a recorded
 *   unknown rewritten to read committed, say;
 * - `ABANDONED`: the row says abandoned where the log holds no ABANDONED, or not where it does;
 * - `LAST_EVENT`: the row agrees on those, but was folded to another last event than the log's (a copy taken earlier);
 * - `SEALED_EVENTS`: the headers agree, but the action's own events, opened, fold to another outcome or do not
 *   authenticate (a read: Journal.checkedRow);
 * - `RETRY_BASIS`: the headers agree, but the row says idempotent, or names a key's expiry, where the action's own
 *   events, opened at the unlock, say otherwise (a recovery deferred to them: restartRetryRestsOnRow).
 */
export type LogHolds =
  | 'DISPATCH_STARTED'
  | 'DISPATCH_STARTED_UNCLASSIFIED'
  | 'CLASSIFIED'
  | 'ADMISSION'
  | 'OUTCOME'
  | 'ABANDONED'
  | 'LAST_EVENT'
  | 'SEALED_EVENTS'
  | 'RETRY_BASIS';

/** What a row the log refutes says against it, by LogHolds: the journal's refusals and the daemon's warnings. */
export const logHoldsWords: Readonly<Record<LogHolds, string>> = {
  DISPATCH_STARTED:
    'it says never dispatched, or names another dispatch, or no outcome after one; the log holds its first DISPATCH_STARTED',
  DISPATCH_STARTED_UNCLASSIFIED:
    'it says an outcome was recorded, or is gone; the log holds a DISPATCH_STARTED with no outcome recorded after it',
  CLASSIFIED: 'it says no outcome was recorded; the log holds one',
  ADMISSION: "it names another session, ticket or lane than the log's admission",
  OUTCOME: "it says another outcome than the log's last header naming one",
  ABANDONED: 'it says abandoned where the log does not, or the other way round',
  LAST_EVENT: 'it was folded to another last event than the log holds (an earlier copy written back?)',
  SEALED_EVENTS: "it says another outcome than the action's own events, or they do not authenticate",
  RETRY_BASIS: "it says idempotent, or names an idempotency key's expiry, where the action's own events do not",
};

/**
 * Whether what classifyRestart would advise for an action a previous run left in flight (dispatched, nothing recorded
 * since) rests on row columns no header proves: `idempotent` (a `backoff`: send it again) or `key_expires_at_ms` (a
 * same-key retry while the key lasts). Both are plaintext any process of the user can rewrite while no broker runs, and
 * `idempotent: true` over a POST would have the sealed BROKER_RESTARTED tell its agent that a second send is safe. So
 * recovery takes them only from the action's own events (Journal.recover defers it to the unlock while they are
 * sealed). The cautious advice, `reconcile`, rests on nothing the row says, so a row claiming neither (no idempotency,
 * no key inside its expiry at `nowMs`) is recovered at open as before.
 */
export function restartRetryRestsOnRow(state: ActionState, nowMs: number): boolean {
  if (state.dispatch_seq === null || state.recorded) return false;
  // A key past its expiry advises reconcile whatever the row says (an expiry forged into the past only adds caution).
  return state.idempotent || (state.key_expires_at_ms !== null && nowMs < state.key_expires_at_ms);
}

/**
 * An action's state with nothing a retry could rest on that only its sealed events prove (restartRetryRestsOnRow): not
 * idempotent, no key's expiry, no retry budget. What a state its events do not fold to is closed or laned over.
 */
export function withoutUnprovenRetry(state: ActionState): ActionState {
  return { ...state, idempotent: false, key_expires_at_ms: null, retry_budget: 0 };
}

/** Whether the log's headers show the action dispatched and not classified since: in flight when the broker stopped. */
export function inFlightByLog(facts: Pick<LogFacts, 'last_dispatch' | 'last_classified'>): boolean {
  return facts.last_dispatch !== null && facts.last_dispatch > (facts.last_classified ?? 0);
}

/**
 * Whether an action's row agrees with the log's headers on what recovery, lanes and reads act on, or what the log
 * holds that the row denies. Every commit folds these into the row from the same events it appends, so an honest row
 * always agrees: `dispatch_seq` is the first DISPATCH_STARTED's seq (never folded back to null), after which the outcome
 * is never null or not_attempted; `recorded` is false exactly from a DISPATCH_STARTED (or the admission) until the next
 * event of a classified kind (core applyClassification), the outcome unknown while dispatched and unrecorded and null
 * while neither; session, ticket and lane are the admission's; the outcome is the last one a header names (where one
 * does: since journal schema 25); `abandoned` only an ABANDONED sets; `last_seq` is the last event folded. `row`
 * undefined: the row is gone; only a log that shows the action in flight, or last left it unknown and not abandoned,
 * refutes that (recovery had no row to read before either).
 */
export function rowRefutation(row: ActionState | undefined, facts: LogFacts): LogHolds | undefined {
  if (row === undefined) {
    if (inFlightByLog(facts)) return 'DISPATCH_STARTED_UNCLASSIFIED';
    // A recorded unknown nobody abandoned: its lane's head while the row stood.
    return facts.outcome === 'unknown' && !facts.abandoned ? 'OUTCOME' : undefined;
  }
  const dispatched = row.dispatch_seq !== null;
  if (row.dispatch_seq !== facts.first_dispatch) return 'DISPATCH_STARTED';
  if (dispatched && (row.outcome === null || row.outcome === 'not_attempted')) return 'DISPATCH_STARTED';
  const classified = facts.last_classified !== null && facts.last_classified > (facts.last_dispatch ?? 0);
  if (row.recorded !== classified) return inFlightByLog(facts) ? 'DISPATCH_STARTED_UNCLASSIFIED' : 'CLASSIFIED';
  if (!row.recorded && (dispatched ? row.outcome !== 'unknown' : row.outcome !== null))
    return dispatched ? 'DISPATCH_STARTED_UNCLASSIFIED' : 'CLASSIFIED';
  if (
    !facts.consistent ||
    row.session_id !== facts.session_id ||
    row.ticket !== facts.ticket ||
    row.lane !== facts.lane
  )
    return 'ADMISSION';
  if (facts.outcome !== null && row.outcome !== facts.outcome) return 'OUTCOME';
  if (row.abandoned !== facts.abandoned) return 'ABANDONED';
  return row.last_seq === facts.last_seq ? undefined : 'LAST_EVENT';
}

/** The outcome basis of what a refuted row reads as while its action's events cannot be opened (never recorded). */
export const rowRefutedEventsSealedBasis = 'row_refuted_events_sealed';

/**
 * What an action whose row the log refutes (rowRefutation) reads as while its own events cannot be opened (the vault
 * locked; Journal.getAction, its lane and its card): its row with what the log's headers establish laid over it, and
 * nothing the headers do not. Its admission's session, ticket and lane, abandoned as the log says, dispatched at the
 * log's first DISPATCH_STARTED, and then:
 * - in flight by the log: no outcome recorded since its last dispatch, unknown, as DISPATCH_STARTED's own fold leaves it;
 * - classified by the log: an outcome was recorded, but which is sealed, so unknown, to be looked up (code
 *   REMOTE_OUTCOME_UNKNOWN, retry `reconcile`, basis row_refuted_events_sealed, source local_gate);
 * - neither: open before dispatch, as the admission leaves it.
 * Never recorded: recoverHeld, or a read once the events open, folds the action's own events.
 */
export function refutedRowState(row: ActionState, facts: LogFacts): ActionState {
  const dispatched = facts.first_dispatch !== null;
  const base: ActionState = {
    ...row,
    session_id: facts.session_id,
    ticket: facts.ticket,
    lane: facts.lane,
    dispatch_seq: facts.first_dispatch,
    dispatch_evidence: dispatched
      ? row.dispatch_evidence === 'never_started'
        ? 'started_locally'
        : row.dispatch_evidence
      : 'never_started',
    result_id: null,
    result_digest: null,
    abandoned: facts.abandoned,
    // The log's last event: a row's own (a forged 10^12, say) would refuse every later event as out of order.
    last_seq: facts.last_seq ?? row.last_seq,
  };
  if (inFlightByLog(facts))
    return {
      ...base,
      stage: 'dispatch_started',
      outcome: 'unknown',
      phase: 'remote_execution',
      effect: 'unknown_effect',
      retry: null,
      code: null,
      outcome_basis: 'dispatch_started_no_result_recorded',
      source: null,
      retry_after_ms: null,
      recorded: false,
    };
  const classified = facts.last_classified !== null;
  const stageIndex = actionStageOrder.indexOf(row.stage);
  const stage =
    dispatched === stageIndex >= actionStageOrder.indexOf('dispatch_started')
      ? row.stage
      : dispatched
        ? 'dispatch_started'
        : 'accepted';
  return {
    ...base,
    stage,
    outcome: classified ? 'unknown' : null,
    phase: classified ? (dispatched ? 'remote_execution' : (row.phase ?? 'validation')) : null,
    effect: classified ? 'unknown_effect' : null,
    retry: classified ? 'reconcile' : null,
    // A code, so an agent's answer says unknown with its retry (stateEnvelope tells an error only with one).
    code: classified ? 'REMOTE_OUTCOME_UNKNOWN' : null,
    outcome_basis: classified ? rowRefutedEventsSealedBasis : null,
    source: classified ? 'local_gate' : null,
    retry_after_ms: null,
    recorded: classified,
  };
}

/**
 * What recoverHeld records for a held action whose own events will never fold (a header row another process inserted,
 * a run whose key was lost for good), over what the headers establish (refutedRowState): nothing proves what happened,
 * so as a quarantined journal's open action, unknown under restartJournalQuarantinedBasis with retry `reconcile` (never
 * a retry its row's unchecked `idempotent` would advise), for a person to attest or abandon. Undefined where the headers
 * say an outcome was recorded: it already reads unknown, to be looked up.
 */
export function unfoldableRecoveryEvent(state: ActionState, nowMs: number): NewEvent | undefined {
  const event = recoveryEvent(state, nowMs, 'quarantined');
  if (event?.classification === undefined) return event;
  return {
    ...event,
    classification: {
      ...event.classification,
      outcome: 'unknown',
      retry: 'reconcile',
      effect: 'unknown_effect',
      outcome_basis: restartJournalQuarantinedBasis,
      source: 'local_gate',
    },
  } as NewEvent;
}
