/**
 * What admission binds for one request on a known route, and the one place the reconciliation lookup's exception lives:
 * the rest of the HTTP driver reads the policy and never asks which mode it runs in.
 */
import type { Route } from '../config/index.js';
import type { ApprovalMode } from '../contract/index.js';
import { resolveRoutePolicy } from '../core/index.js';
import type { NormalizedHttpRequest } from './http-action-request.js';

/**
 * Narrow executor options, each a named exception rather than a general bypass.
 * `reconciles`: this request is the configured lookup a person asked for to settle that unknown
 * action. It is still a recorded action with its own ticket, events and credential injection, but
 * it is admitted with approval `none` (the person's request is the approval) and lane null (it must
 * not wait behind the very head it settles), and its ACTION_ACCEPTED names the action it
 * reconciles. Its method (GET/HEAD) comes from configuration, so the route's agent method list does
 * not apply to it.
 */
export interface HttpActionOptions {
  readonly reconciles?: string;
}

export interface AdmissionPolicy {
  /** The methods validation allows. */
  readonly methods: readonly string[];
  readonly lane: string | null;
  readonly approval: ApprovalMode;
  /** The route rule that chose the approval, as ACTION_ACCEPTED records it. */
  readonly approvalRule?: string;
  /** Bound at admission: a later configuration change neither widens nor resets it. */
  readonly retryBudget?: number;
  /** The unknown action this lookup settles (ACTION_ACCEPTED `reconciles`). */
  readonly reconciles?: string;
  /** Whether the retry engine may send further attempts after the first. */
  readonly retriesAllowed: boolean;
}

/** The route's policy for this request as resolved now, or the lookup's exception to it (HttpActionOptions). */
export function admissionPolicy(
  route: Route,
  request: NormalizedHttpRequest,
  options: HttpActionOptions,
): AdmissionPolicy {
  if (options.reconciles !== undefined) return lookupPolicy(route, options.reconciles);
  const policy = resolveRoutePolicy(route, request.method, request.path);
  return {
    methods: route.methods,
    lane: policy.lane.kind === 'lane' ? policy.lane.lane : null,
    approval: policy.approval,
    ...(policy.rule === null ? {} : { approvalRule: policy.rule.text }),
    ...(route.retry === undefined ? {} : { retryBudget: route.retry.attempts_max }),
    retriesAllowed: true,
  };
}

/**
 * A reconciliation lookup is the person's own request: no rule, lane or retry budget applies to it. Its method comes
 * from the route's `lookup` (a bounded read-back's is GET): only those are allowed beside the agent's method list.
 * The engine never retries it: it is asked again by whoever asked for it.
 */
function lookupPolicy(route: Route, reconciles: string): AdmissionPolicy {
  const reconcileMethods = [
    ...(route.lookup === undefined ? [] : [route.lookup.method]),
    ...(route.correlation?.read_back === undefined ? [] : (['GET'] as const)),
  ];
  return {
    methods: [...route.methods, ...reconcileMethods],
    lane: null,
    approval: 'none',
    reconciles,
    retriesAllowed: false,
  };
}
