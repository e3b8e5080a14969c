import type { ApprovalMode } from '../contract/index.js';
import { fillTemplate, matchPathTemplate } from './path-template.js';
import { resolveLane, type LaneResolution, type LaneRouteView } from './resolve-lane.js';

/** One configured method/path rule of a route (postern.yaml `routes[].rules[]`). */
export interface RouteRule {
  /** Upper-case methods, or ['*'] for any method. */
  readonly methods: readonly string[];
  readonly path: string;
  readonly approval: ApprovalMode;
  /** Lane name; `{param}` placeholders are filled from the path template. Absent: the route's lane rules decide. */
  readonly lane?: string | undefined;
}

export interface RoutePolicyView extends LaneRouteView {
  readonly approval: ApprovalMode;
  readonly rules?: readonly RouteRule[] | undefined;
}

/** What one call on a route needs: its approval, its lane, and the rule that decided them (null: the route's own). */
export interface RoutePolicy {
  readonly approval: ApprovalMode;
  readonly lane: LaneResolution;
  readonly rule: { readonly index: number; readonly text: string } | null;
}

const laneCharsMax = 200;
/** The rule's words as journaled and shown on the card: bounded, the configuration is the whole truth. */
export const ruleTextCharsMax = 300;

/**
 * Approval and lane of one HTTP call (docs/config.md, Rules). The first rule whose methods and path
 * template match decides the approval; its lane, when it names one, wins over `lanes` and the read
 * bypass (the rule is the more specific statement). No rule matches: the route's approval and
 * resolveLane, exactly as without rules. Whether a rule may be looser than its route is a load-time
 * check (config-schema.ts), not a decision made here.
 */
export function resolveRoutePolicy(route: RoutePolicyView, method: string, path: string): RoutePolicy {
  for (const [index, rule] of (route.rules ?? []).entries()) {
    if (!rule.methods.includes('*') && !rule.methods.includes(method)) continue;
    const params = matchPathTemplate(rule.path, path);
    if (params === undefined) continue;
    const filled = rule.lane === undefined ? undefined : fillTemplate(rule.lane, params);
    const lane: LaneResolution =
      filled !== undefined && filled.length <= laneCharsMax
        ? { kind: 'lane', lane: filled, rule: null }
        : resolveLane(route, method, path);
    return { approval: rule.approval, lane, rule: { index, text: describeRouteRule(index, rule) } };
  }
  return { approval: route.approval, lane: resolveLane(route, method, path), rule: null };
}

/** `rules[1]: POST PATCH /documents/** → per_call`, cut to ruleTextCharsMax. */
export function describeRouteRule(index: number, rule: RouteRule): string {
  const text = `rules[${index}]: ${rule.methods.join(' ')} ${rule.path} → ${rule.approval}`;
  return text.length > ruleTextCharsMax ? `${text.slice(0, ruleTextCharsMax - 1)}…` : text;
}
