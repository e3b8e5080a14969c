import { fillTemplate, matchPathTemplate } from './path-template.js';

/** One configured lane rule: requests whose method and path match share the named lane. */
export interface LaneRule {
  /** Upper-case methods, or ['*'] for any method. */
  readonly methods: readonly string[];
  readonly path: string;
  /** Lane name; `{param}` placeholders are filled from the path template. */
  readonly lane: string;
}

export interface LaneRouteView {
  readonly name: string;
  readonly lanes: readonly LaneRule[];
  readonly reads_bypass_lanes: boolean;
}

export type LaneResolution =
  { readonly kind: 'lane'; readonly lane: string; readonly rule: number | null } | { readonly kind: 'bypass' };

/** Observational reads (RFC 9110 safe methods); only these may bypass lanes. */
export const readMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

const laneCharsMax = 200;

/**
 * Which lane an HTTP request belongs to (DESIGN §4). The first matching rule wins; a read bypasses
 * lanes only when the route says reads do; anything else — unknown or ambiguous — is treated as a
 * write and shares the route's own lane, so it can never overtake a conflicting write.
 */
export function resolveLane(route: LaneRouteView, method: string, path: string): LaneResolution {
  if (route.reads_bypass_lanes && readMethods.has(method)) return { kind: 'bypass' };
  for (const [i, rule] of route.lanes.entries()) {
    if (!rule.methods.includes('*') && !rule.methods.includes(method)) continue;
    const params = matchPathTemplate(rule.path, path);
    if (params === undefined) continue;
    const lane = fillTemplate(rule.lane, params);
    if (lane.length <= laneCharsMax) return { kind: 'lane', lane, rule: i };
  }
  return { kind: 'lane', lane: routeLane(route.name), rule: null };
}

/** The lane every otherwise unmatched request of a route shares. */
export function routeLane(routeName: string): string {
  return `route:${routeName}`;
}
