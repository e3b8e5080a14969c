import type { Classification } from '../contract/index.js';
import { fillTemplate, pathTemplateParams } from './path-template.js';

/** The ids a reconciliation lookup can name the original operation by, strongest first. */
export type ReconcileCorrelation = 'idempotency_token' | 'operation_id';

/** What the original action's record offers to correlate on. */
export interface CorrelationFacts {
  /** The key bound at admission (PREFLIGHT_VALIDATED's idempotency binding), if any. */
  readonly idempotencyKey?: string;
  /** The job id an OPERATION_SUBMITTED named, if any. */
  readonly operationId?: string;
}

export type LookupPlan =
  | { readonly ok: true; readonly correlation: ReconcileCorrelation; readonly path: string }
  | { readonly ok: false; readonly why: string };

/** Which template placeholder carries which correlation, in strength order. */
const placeholders: ReadonlyArray<{ readonly name: string; readonly correlation: ReconcileCorrelation; readonly fact: keyof CorrelationFacts }> = [
  { name: 'idempotency_key', correlation: 'idempotency_token', fact: 'idempotencyKey' },
  { name: 'operation_id', correlation: 'operation_id', fact: 'operationId' },
];

/**
 * Fills a route's lookup path template from the strongest correlation the record holds. The
 * template must bind exactly one known placeholder: a lookup that names nothing of this operation
 * (or something the broker cannot fill) could only report on some other operation, so it is no
 * evidence at all. The value is percent-encoded as one path segment: the id comes from the agent
 * (a key) or the remote (a job id), never trusted to be path-safe.
 */
export function planLookup(template: string, facts: CorrelationFacts): LookupPlan {
  const params = pathTemplateParams(template);
  const known = placeholders.filter((p) => params.includes(p.name));
  if (known.length === 0 || known.length !== params.length) {
    return { ok: false, why: 'the lookup path must bind exactly one of {idempotency_key} or {operation_id}' };
  }
  for (const p of known) {
    const value = facts[p.fact];
    if (value === undefined) continue;
    return { ok: true, correlation: p.correlation, path: fillTemplate(template, { [p.name]: encodeURIComponent(value) }) };
  }
  const names = known.map((p) => `{${p.name}}`).join(' or ');
  return { ok: false, why: `the lookup needs ${names}, and this action's record holds none (no idempotency key was bound, no operation id was returned)` };
}

/**
 * What a reconciliation lookup's answer says about the original action (source remote_query).
 * `lookupStatus` is the status of the lookup's complete, settled response, or undefined when the
 * lookup has none (it was refused, failed, or its own outcome is unknown).
 *
 * - A complete 2xx: the remote holds the operation, so the original took effect (committed,
 *   succeeded, retry never). The body is not interpreted: a lookup route declares that 2xx means
 *   "found", and a remote whose found operation may itself have failed should not declare one.
 * - 404/410 under an idempotency token, asked while the key is still within its declared
 *   retention (`keyWithinRetention`: now is before the binding's earliest safe expiry): the remote
 *   reports no operation under that key. This trusts the route's declared contract — that the
 *   remote records every key it accepted and keeps it for the declared retention — so the original
 *   never took effect (rejected, no_effect). After the retention an absent key proves nothing (it
 *   may have been forgotten), and under an operation id the job was created, so neither settles.
 * - Anything else: inconclusive. Recorded (so the attempt is visible) with outcome unknown and
 *   retry reconcile; the action stays unknown.
 *
 * Never not_attempted: the original was dispatched, and nothing a lookup learns can undo that.
 */
export function reconcileClassification(lookupStatus: number | undefined, correlation: ReconcileCorrelation, keyWithinRetention = false): Classification {
  const base = { phase: 'remote_execution', source: 'remote_query' } as const;
  if (lookupStatus !== undefined && lookupStatus >= 200 && lookupStatus < 300) {
    return { ...base, outcome: 'committed', retry: 'never', code: null, effect: 'succeeded', outcome_basis: 'remote_query_found' };
  }
  if ((lookupStatus === 404 || lookupStatus === 410) && correlation === 'idempotency_token' && keyWithinRetention) {
    return { ...base, outcome: 'rejected', retry: 'never', code: 'REMOTE_REJECTED', effect: 'no_effect', outcome_basis: 'remote_query_no_record' };
  }
  return { ...base, outcome: 'unknown', retry: 'reconcile', code: 'REMOTE_OUTCOME_UNKNOWN', effect: 'unknown_effect', outcome_basis: 'remote_query_inconclusive' };
}
