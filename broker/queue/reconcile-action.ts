import type { Route } from '../config/index.js';
import { CodedError, type ActionState, type JournalEvent } from '../contract/index.js';
import { normalizeRequestPath, planLookup, reconcileClassification, type CorrelationFacts } from '../core/index.js';
import type { OperatorActor, OperatorReconciler, ReconcileResult } from '../ports/index.js';
import type { ApprovalQueue } from './approval-queue.js';
import { conflictMessage } from './decision-conflict.js';
import { executeHttpAction, type HttpActionDeps } from './execute-http-action.js';

/** What a reconciliation needs: an HTTP executor's deps, with the approval queue itself as its queue. */
export type ReconcileDeps = Omit<HttpActionDeps, 'queue' | 'sessionId' | 'onAdmitted'> & { readonly queue: ApprovalQueue };

/**
 * Reconciliation by the route's lookup operation, asked for by a person (DESIGN §3: one of the
 * only ways out of unknown is querying the remote with a stable operation id or token). The lookup
 * runs as its own recorded action through the normal executor (own ticket, events and credential
 * injection), admitted with approval none and no lane (executor option `reconciles`); its answer is
 * then appended to the original as a new observation, RECONCILIATION_RESULT {correlation,
 * lookup_action_id}, classified by broker/core reconcileClassification (source remote_query, never
 * not_attempted). The original's caller_disposition is never touched.
 */
export function createReconciler(deps: ReconcileDeps): OperatorReconciler {
  return { reconcile: (actionId, actor) => reconcileAction(deps, actionId, actor) };
}

export async function reconcileAction(deps: ReconcileDeps, actionId: string, actor: OperatorActor): Promise<ReconcileResult> {
  const state = deps.journal.getAction(actionId);
  if (state === undefined || !actionId.startsWith('act_')) throw new CodedError('NOT_FOUND', `no action ${actionId}`, { field: 'action_id' });
  if (state.dispatch_seq === null || !state.recorded || state.outcome !== 'unknown') {
    throw new CodedError('DECISION_CONFLICT', conflictMessage(state, 'reconcile'), { field: 'action_id' });
  }
  const route = lookupRoute(deps, state);
  const lookup = route.lookup;
  if (lookup === undefined) throw new CodedError('UNSUPPORTED_ACTION', `route ${route.name} declares no lookup operation; a person can attest the outcome instead`, { field: 'lookup' });
  const facts = correlationFacts(deps.journal.subjectEvents(actionId));
  const plan = planLookup(lookup.path, facts);
  if (!plan.ok) throw new CodedError('UNSUPPORTED_ACTION', `cannot reconcile ${actionId}: ${plan.why}`, { field: 'lookup' });
  // The executor would refuse it too (recorded, not_attempted); refusing here records nothing.
  const pathCheck = normalizeRequestPath(plan.path);
  if (!pathCheck.ok) throw new CodedError('UNSUPPORTED_ACTION', `cannot reconcile ${actionId}: the filled lookup path is not sendable (${pathCheck.why})`, { field: 'lookup' });

  const lookupResult = await executeHttpAction(deps, { route: route.name, method: lookup.method, path: plan.path }, { reconciles: actionId });
  const lookupActionId = lookupResult.envelope.invocation_id;
  // The key's retention is read now, after the lookup answered: an answer inside it is within it.
  const withinRetention = facts.keyExpiresAtMs !== undefined && deps.clock.nowMs() < facts.keyExpiresAtMs;
  const classification = reconcileClassification(lookupResult.response?.status, plan.correlation, withinRetention);
  const appended = await deps.queue.recordReconciliation({
    kind: 'RECONCILIATION_RESULT',
    action_id: actionId,
    payload: { correlation: plan.correlation, lookup_action_id: lookupActionId, actor },
    classification,
  });
  deps.logger?.info({ action_id: actionId, lookup_action_id: lookupActionId, correlation: plan.correlation, outcome: classification.outcome, outcome_basis: classification.outcome_basis }, 'reconciliation recorded');
  return {
    action_id: actionId,
    ticket: appended.state.ticket ?? 0,
    lookup_action_id: lookupActionId,
    correlation: plan.correlation,
    outcome: classification.outcome,
    effect: classification.effect,
    outcome_basis: classification.outcome_basis,
    journal_seq: appended.event.seq,
  };
}

/** The configured HTTP route the action was sent on (its target names it: `route:NAME METHOD path`). */
function lookupRoute(deps: ReconcileDeps, state: ActionState): Route {
  const name = state.channel === 'http' ? /^route:(\S+) /.exec(state.target)?.[1] : undefined;
  const route = name === undefined ? undefined : deps.config.routes.get(name);
  if (route === undefined) throw new CodedError('UNSUPPORTED_ACTION', `${state.action_id} was not sent on a configured HTTP route; there is no lookup to ask`, { field: 'lookup' });
  return route;
}

/**
 * The correlations the original's own record holds: the idempotency key bound at admission
 * (PREFLIGHT_VALIDATED, journaled before any byte was sent, so it is the key the remote saw) and
 * any job id an OPERATION_SUBMITTED named.
 */
function correlationFacts(events: readonly JournalEvent[]): CorrelationFacts & { keyExpiresAtMs?: number } {
  let facts: CorrelationFacts & { keyExpiresAtMs?: number } = {};
  for (const e of events) {
    if (e.kind === 'PREFLIGHT_VALIDATED' && e.payload.idempotency !== undefined) {
      facts = { ...facts, idempotencyKey: e.payload.idempotency.key, keyExpiresAtMs: e.payload.idempotency.expires_at_ms };
    }
    if (e.kind === 'OPERATION_SUBMITTED' && e.payload.job_id !== undefined) facts = { ...facts, operationId: e.payload.job_id };
  }
  return facts;
}
