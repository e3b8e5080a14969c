import type { Route } from '../config/index.js';
import {
  CodedError,
  isCodedError,
  type ActionState,
  type Classification,
  type JournalEvent,
  unknownWaysOut,
} from '../contract/index.js';
import {
  classifyReadBack,
  judgeLookup,
  leaseLive,
  lookupNotFoundAfterSecondsDefault,
  normalizeRequestPath,
  planLookup,
  planReadBack,
  type CorrelationFacts,
  type LookupCorrelation,
  type ReadBackSpec,
  type ReconcileCorrelation,
} from '../core/index.js';
import type { OperatorActor, OperatorReconciler, ReconcileResult } from '../ports/index.js';
import type { ApprovalQueue } from '../queue/approval-queue.js';
import { conflictMessage } from '../queue/decision-conflict.js';
import { executeHttpLookup, type HttpActionDeps, type HttpActionResult } from './execute-http-action.js';
import { assertSameOrigin } from './retry-http.js';
import type { InternalHttpRequest } from './http-action-request.js';

/** What a reconciliation needs: an HTTP executor's deps, with the approval queue itself as its queue. */
export type ReconcileDeps = Omit<HttpActionDeps, 'queue' | 'sessionId' | 'onAdmitted'> & {
  readonly queue: ApprovalQueue;
};

/**
 * Reconciliation asked for by a person (DESIGN §3: one of the only ways out of unknown is querying
 * the remote with a stable operation id or token). Two ways to ask, strongest first (article 003):
 *
 * - The route's `lookup`, filled with the strongest id the record holds: the idempotency token the
 *   target accepted, the operation id it returned, or the provider's request id from the response
 *   headers (broker/core planLookup).
 * - Only when no lookup applies: the route's bounded read-back (`correlation.read_back`), filled
 *   with the request fields journaled at admission; its answer is judged by broker/core
 *   classifyReadBack, and the record says why it is enough or why ambiguity remains (`note`).
 *
 * Either runs as its own recorded action through the normal executor (own ticket, events and
 * credential injection), admitted with approval none and no lane (executor option `reconciles`);
 * its answer is then appended to the original as a new observation, RECONCILIATION_RESULT
 * {correlation, lookup_action_id}, source remote_query, never not_attempted. The original's
 * caller_disposition is never touched.
 */
export function createReconciler(deps: ReconcileDeps): OperatorReconciler {
  return { reconcile: (actionId, actor) => reconcileAction(deps, actionId, actor) };
}

/**
 * The retry engine's way out once an idempotency key's window passed (DESIGN §3: stop retrying and
 * reconcile): the same lookup a person would ask for, recorded without an actor (automation).
 * A lookup that cannot run (no lookup, no correlation) leaves the action as it is, logged.
 */
export function createAutomaticReconcile(deps: ReconcileDeps): (actionId: string) => Promise<void> {
  return async (actionId) => {
    try {
      await reconcileAction(deps, actionId, undefined);
    } catch (error) {
      deps.logger?.info(
        { action_id: actionId, code: isCodedError(error) ? error.code : 'INTERNAL' },
        'automatic reconciliation did not run',
      );
      if (!isCodedError(error)) throw error;
    }
  };
}

export async function reconcileAction(
  deps: ReconcileDeps,
  actionId: string,
  actor: OperatorActor | undefined,
): Promise<ReconcileResult> {
  const p = await planReconcile(deps, actionId);
  if (p.kind === 'lookup') {
    const askedAtMs = deps.clock.nowMs();
    const lookupResult = await executeHttpLookup(
      deps,
      { route: p.route.name, method: p.method, path: p.path },
      actionId,
    );
    // The key's retention is read now, after the lookup answered: an answer inside it is within it.
    const { classification, note } = judgeLookup(lookupResult.response?.status, p.correlation, {
      keyExpiresAtMs: p.facts.keyExpiresAtMs,
      attemptEndedAtMs: p.attemptEndedAtMs,
      askedAtMs,
      answeredAtMs: deps.clock.nowMs(),
      notFoundAfterMs: (p.route.lookup?.not_found_after_seconds ?? lookupNotFoundAfterSecondsDefault) * 1000,
    });
    return record(deps, actionId, actor, lookupResult, {
      correlation: p.correlation,
      classification,
      attemptsSeen: p.attemptsSeen,
      ...(note === undefined ? {} : { note }),
    });
  }
  return readBackAndRecord(deps, actionId, actor, p.route, p.readBack, p.values, p.readPlan, p.attemptsSeen);
}

type ReadBackPlan = Extract<ReturnType<typeof planReadBack>, { ok: true }>;

/** What a reconciliation would ask, decided before anything is sent (`planReconcile`). */
export type ReconcilePlan =
  | {
      readonly kind: 'lookup';
      readonly route: Route;
      readonly method: string;
      readonly path: string;
      readonly correlation: LookupCorrelation;
      readonly facts: CorrelationFacts & { keyExpiresAtMs?: number };
      readonly attemptsSeen: number;
      /** The newest event of the original's attempts: when the broker last heard of or gave up on them. */
      readonly attemptEndedAtMs: number;
    }
  | {
      readonly kind: 'read_back';
      readonly route: Route;
      readonly readBack: ReadBackSpec;
      readonly values: Readonly<Record<string, string>>;
      readonly readPlan: ReadBackPlan;
      readonly attemptsSeen: number;
    };

/**
 * Every refusal a reconciliation can give before it sends anything (no secret touched, nothing recorded): the action,
 * its recorded unknown, a live retry lease, the route, its lookup or read-back and the ids to fill it with. The
 * operator's `actions.precheck` runs it alone, so the CLI can refuse before it asks a person for the passphrase.
 */
export async function planReconcile(deps: ReconcileDeps, actionId: string): Promise<ReconcilePlan> {
  // The refusals the state and the configuration give come first, before anything reads the action's events (sealed
  // while the vault is locked, for an earlier run's action).
  lookupRoute(deps, reconcilable(deps, actionId));
  // Read once everything queued before is committed, without holding the loop (Journal.readCurrent).
  const events = await deps.journal.readCurrent(() => deps.journal.subjectEvents(actionId));
  // Decided on the state as it is now: a retry's lease may have started while the read waited.
  const state = reconcilable(deps, actionId);
  // A retry that starts while the lookup runs makes its answer stale: the journal compares this.
  const attemptsSeen = state.attempts.length;
  const route = lookupRoute(deps, state);
  assertSameOrigin(events, state.action_id, route);
  const lookup = route.lookup;
  const readBack = route.correlation?.read_back;
  if (lookup === undefined && readBack === undefined) {
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `route ${route.name} declares no lookup operation and no bounded read-back: ${unknownWaysOut(state)}`,
      { field: 'lookup' },
    );
  }
  const facts = correlationFacts(events);
  const plan = lookup === undefined ? undefined : planLookup(lookup.path, facts);
  if (lookup !== undefined && plan?.ok === true) {
    const path = sendablePath(actionId, plan.path);
    const attemptEndedAtMs = attemptsEndedAt(events);
    return {
      kind: 'lookup',
      route,
      method: lookup.method,
      path,
      correlation: plan.correlation,
      facts,
      attemptsSeen,
      attemptEndedAtMs,
    };
  }
  if (readBack === undefined)
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `cannot reconcile ${actionId}: ${plan?.ok === false ? plan.why : 'no lookup applies'}`,
      { field: 'lookup' },
    );
  const values = facts.correlationValues ?? {};
  const readPlan = planReadBack(readBack, values);
  if (!readPlan.ok) {
    const whys = [...(plan?.ok === false ? [plan.why] : []), readPlan.why];
    throw new CodedError('UNSUPPORTED_ACTION', `cannot reconcile ${actionId}: ${whys.join('; ')}`, { field: 'lookup' });
  }
  sendablePath(actionId, readPlan.path);
  return { kind: 'read_back', route, readBack, values, readPlan, attemptsSeen };
}

/**
 * When the original's attempts were last heard of: its newest event that is not an earlier reconciliation's (those
 * are lookups of their own, not the original's request).
 */
function attemptsEndedAt(events: readonly JournalEvent[]): number {
  let newest = 0;
  for (const event of events) if (event.kind !== 'RECONCILIATION_RESULT') newest = Math.max(newest, event.at_ms);
  return newest;
}

/** The action, if its state allows a reconciliation now (a recorded unknown, no live retry lease); else the refusal. */
function reconcilable(deps: ReconcileDeps, actionId: string): ActionState {
  const state = deps.journal.getAction(actionId);
  if (state === undefined || !actionId.startsWith('act_'))
    throw new CodedError('NOT_FOUND', `no action ${actionId}`, { field: 'action_id' });
  // A recorded unknown, dispatched or not (a quarantined journal's recovery records one before dispatch): the remote
  // is asked now, with the ids the record bound at admission, whatever the lost part of the journal said.
  if (!state.recorded || state.outcome !== 'unknown') {
    throw new CodedError('DECISION_CONFLICT', conflictMessage(state, 'reconcile'), { field: 'action_id' });
  }
  if (leaseLive(state, deps.clock.nowMs())) {
    throw new CodedError(
      'DECISION_CONFLICT',
      `${actionId} is being retried (lease generation ${state.lease?.generation ?? 0}); its attempt's own answer decides — reconcile after it`,
      { field: 'action_id' },
    );
  }
  return state;
}

/**
 * The bounded read-back: a GET of the filled path and query, as its own recorded action, whose
 * stored answer (scrubbed of any echoed secret, capped, flagged truncated) is judged in the core.
 */
async function readBackAndRecord(
  deps: ReconcileDeps,
  actionId: string,
  actor: OperatorActor | undefined,
  route: Route,
  spec: ReadBackSpec,
  values: Readonly<Record<string, string>>,
  readPlan: { readonly path: string; readonly query: Readonly<Record<string, string>> },
  attemptsSeen: number,
): Promise<ReconcileResult> {
  const path = sendablePath(actionId, readPlan.path);
  const input: InternalHttpRequest = {
    route: route.name,
    method: 'GET',
    path,
    ...(Object.keys(readPlan.query).length === 0 ? {} : { query: readPlan.query }),
  };
  const lookupResult = await executeHttpLookup(deps, input, actionId);
  const response = lookupResult.response;
  const verdict = classifyReadBack(
    { status: response?.status, body: response?.body.toString('utf8') ?? '', truncated: response?.truncated ?? false },
    spec,
    values,
  );
  return record(deps, actionId, actor, lookupResult, {
    correlation: 'bounded_read_back',
    attemptsSeen,
    classification: verdict.classification,
    note: verdict.note,
    ...(verdict.readBack === undefined ? {} : { readBack: verdict.readBack }),
  });
}

interface Learned {
  readonly correlation: ReconcileCorrelation;
  readonly attemptsSeen: number;
  readonly classification: Classification;
  readonly note?: string;
  readonly readBack?: { readonly matched: number; readonly examined: number };
}

/** Appends what the lookup learned to the original (RECONCILIATION_RESULT) and answers the person. */
async function record(
  deps: ReconcileDeps,
  actionId: string,
  actor: OperatorActor | undefined,
  lookupResult: HttpActionResult,
  learned: Learned,
): Promise<ReconcileResult> {
  const lookupActionId = lookupResult.envelope.invocation_id;
  const { correlation, classification, note, readBack, attemptsSeen } = learned;
  const evidence = {
    ...(note === undefined ? {} : { note }),
    ...(readBack === undefined ? {} : { read_back: { matched: readBack.matched, examined: readBack.examined } }),
  };
  const appended = await deps.queue.recordReconciliation({
    kind: 'RECONCILIATION_RESULT',
    action_id: actionId,
    payload: {
      correlation,
      lookup_action_id: lookupActionId,
      attempts_seen: attemptsSeen,
      ...(actor === undefined ? {} : { actor }),
      ...evidence,
    },
    classification,
  });
  deps.logger?.info(
    {
      action_id: actionId,
      lookup_action_id: lookupActionId,
      correlation,
      outcome: classification.outcome,
      outcome_basis: classification.outcome_basis,
    },
    'reconciliation recorded',
  );
  return {
    action_id: actionId,
    ticket: appended.state.ticket ?? 0,
    lookup_action_id: lookupActionId,
    correlation,
    outcome: classification.outcome,
    effect: classification.effect,
    outcome_basis: classification.outcome_basis,
    journal_seq: appended.event.seq,
    ...evidence,
  };
}

/** The executor would refuse an unsendable path too (recorded, not_attempted); refusing here records nothing. */
function sendablePath(actionId: string, path: string): string {
  const check = normalizeRequestPath(path);
  if (!check.ok)
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `cannot reconcile ${actionId}: the filled lookup path is not sendable (${check.why})`,
      { field: 'lookup' },
    );
  return path;
}

/** The configured HTTP route the action was sent on (its target names it: `route:NAME METHOD path`). */
function lookupRoute(deps: ReconcileDeps, state: ActionState): Route {
  const name = state.channel === 'http' ? /^route:(\S+) /.exec(state.target)?.[1] : undefined;
  const route = name === undefined ? undefined : deps.config.routes.get(name);
  if (route === undefined)
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `${state.action_id} ${notOnRoute(state)}; there is no lookup to ask: ${unknownWaysOut(state)}`,
      { field: 'lookup' },
    );
  return route;
}

/** Why no route's lookup applies: an SSH command or an MCP tool call has none, an HTTP route may be gone since. */
function notOnRoute(state: ActionState): string {
  if (state.channel === 'ssh')
    return 'is an SSH command: nothing can ask the host what it did (no lookup exists for SSH)';
  if (state.channel === 'mcp') return 'is an MCP tool call: no lookup exists for an upstream tool';
  return 'was not sent on a configured HTTP route';
}

/**
 * The correlations the original's own record holds: the idempotency key bound at admission
 * (PREFLIGHT_VALIDATED, journaled before any byte was sent, so it is the key the remote saw) and
 * the request field values journaled with it, any job id an OPERATION_SUBMITTED named, and the
 * provider request id of the latest response that carried one (a retry's response is the newest).
 */
function correlationFacts(events: readonly JournalEvent[]): CorrelationFacts & { keyExpiresAtMs?: number } {
  let facts: CorrelationFacts & { keyExpiresAtMs?: number } = {};
  for (const e of events) {
    if (e.kind === 'PREFLIGHT_VALIDATED' && e.payload.idempotency !== undefined) {
      facts = {
        ...facts,
        idempotencyKey: e.payload.idempotency.key,
        keyExpiresAtMs: e.payload.idempotency.expires_at_ms,
      };
    }
    if (e.kind === 'PREFLIGHT_VALIDATED' && e.payload.correlation_values !== undefined)
      facts = { ...facts, correlationValues: e.payload.correlation_values };
    if (e.kind === 'OPERATION_SUBMITTED' && e.payload.job_id !== undefined)
      facts = { ...facts, operationId: e.payload.job_id };
    if (e.kind === 'REMOTE_RESPONSE_STARTED' && e.payload.provider_request_id !== undefined)
      facts = { ...facts, providerRequestId: e.payload.provider_request_id };
  }
  return facts;
}
