import { tabIds, type TabId } from './tabs.js';
import type { TimelineGrouping } from './timeline-layout.js';

/**
 * The address's hash names what the shell shows, so a view can be linked and reloaded:
 * `#/approvals`, `#/activity`, `#/metrics` (any tab by its id; a click on a tab writes it: tabChoiceHref), `#/activity/timeline` (a tab and one of its modes),
 * `#/activity/timeline?by=session` (a mode's option: the timeline's grouping) or
 * `#/action/<action_id>` (one action's detail). A detail opened from a view names it,
 * `#/action/<id>?from=activity/timeline&by=session` or `#/action/<id>?from=approvals`, so its back link returns there
 * (reload too). The mode and options are present only when the hash names them.
 */
export type TabRoute = { kind: 'tab'; tab: string; mode?: string; by?: string };
export type HashRoute = { kind: 'none' } | TabRoute | { kind: 'action'; actionId: string; from?: TabRoute };

/** Action ids as the broker issues them (act_…); the bound matches actions.show's input. */
const actionIdPattern = /^act_[A-Za-z0-9_-]{1,76}$/;

/** Pure: the route a hash names; anything unrecognised is no route (the shell keeps its tab). */
export function parseHashRoute(hash: string): HashRoute {
  const text = hash.replace(/^#\/?/, '');
  const at = text.indexOf('?');
  const path = at < 0 ? text : text.slice(0, at);
  const query = new URLSearchParams(at < 0 ? '' : text.slice(at + 1));
  const parts = path.split('/');
  if (parts[0] === 'action' && parts.length === 2) {
    const actionId = decodeURIComponent(parts[1] ?? '');
    if (!actionIdPattern.test(actionId)) return { kind: 'none' };
    const from = originOf(query.get('from') ?? '', query.get('by'));
    return from === null ? { kind: 'action', actionId } : { kind: 'action', actionId, from };
  }
  return tabRouteOf(path, query.get('by')) ?? { kind: 'none' };
}

/** Pure: `tab` or `tab/mode` with an optional `by` (dropped when it is not a name), or null. */
function tabRouteOf(path: string, by: string | null): TabRoute | null {
  const parts = path.split('/');
  const [tab = '', mode] = parts;
  if (!namePattern.test(tab) || parts.length > 2 || (mode !== undefined && !namePattern.test(mode))) return null;
  return {
    kind: 'tab',
    tab,
    ...(mode === undefined ? {} : { mode }),
    ...(by !== null && namePattern.test(by) ? { by } : {}),
  };
}

function oneOf<T extends string>(values: readonly T[], value: string | undefined): value is T {
  return values.some((v) => v === value);
}

/**
 * Pure: the view a detail was opened from (`from=` and its `by`), as the console can show it, or null. The address
 * is the person's to edit (and a link's to forge): only a tab the console has, with a mode that tab has (Activity's)
 * and a grouping that mode has (the timeline's), is an origin; an unknown tab or mode is none (the back link
 * returns to the tab shown), an unknown grouping is the default one. Nothing of the raw text reaches the page.
 */
function originOf(from: string, by: string | null): TabRoute | null {
  const route = tabRouteOf(from, null);
  if (route === null || !oneOf(tabIds, route.tab)) return null;
  if (route.mode === undefined) return { kind: 'tab', tab: route.tab };
  if (route.tab !== 'activity' || !oneOf(activityModes, route.mode)) return null;
  return activityOrigin(
    route.mode,
    route.mode === 'timeline' && by !== null && oneOf(timelineGroupings, by) ? by : undefined,
  );
}

/** A tab's or a mode's id: lower-case words joined by dashes, bounded. */
const namePattern = /^[a-z][a-z-]{0,30}$/;

/** The address of a tab route, the inverse of parseHashRoute. */
export function tabHref(route: TabRoute): string {
  return `#/${tabPath(route)}${route.by === undefined ? '' : `?by=${route.by}`}`;
}

/**
 * Pure: the address a tab chosen in the tab list leaves: `#/<tab>`, whatever the address named before (nothing — the
 * page as signed in, at `/` —, another tab, a mode, an action). A reload and a re-sign-in mount the console again
 * from the address, so a tab it did not name would be lost: the console would open on its first tab. Null when the
 * address already names that tab as it is (no second history entry).
 */
export function tabChoiceHref(route: HashRoute, tab: string): string | null {
  if (route.kind === 'tab' && route.tab === tab && route.mode === undefined && route.by === undefined) return null;
  return tabHref({ kind: 'tab', tab });
}

function tabPath(route: TabRoute): string {
  return route.mode === undefined ? route.tab : `${route.tab}/${route.mode}`;
}

/** A tab, as the origin of a detail link (an Approvals card's, the first-run guide's). */
export function tabOrigin(tab: TabId): TabRoute {
  return { kind: 'tab', tab };
}

/** One action's detail; `from` is the view it is opened from, where its back link returns. */
export function actionHref(actionId: string, from?: TabRoute): string {
  const origin = from === undefined ? '' : `?from=${tabPath(from)}${from.by === undefined ? '' : `&by=${from.by}`}`;
  return `#/action/${encodeURIComponent(actionId)}${origin}`;
}

/**
 * Pure: where a detail's back link goes and the tab it names: the view it was opened from when
 * the address says so, else the tab shown (`#/<tab>`).
 */
export function backOf(route: HashRoute, tab: string): { href: string; tab: string } {
  if (route.kind === 'action' && route.from !== undefined) return { href: tabHref(route.from), tab: route.from.tab };
  return { href: `#/${tab}`, tab };
}

/** The Activity tab's modes; the first is what `#/activity` alone shows. */
export const activityModes = ['actions', 'timeline', 'events'] as const;
export type ActivityMode = (typeof activityModes)[number];

/** Pure: the Activity mode a route names (`#/activity/<mode>`), the default for anything else. */
export function activityModeOf(route: HashRoute): ActivityMode {
  if (route.kind !== 'tab' || route.tab !== 'activity') return activityModes[0];
  return activityModes.find((m) => m === route.mode) ?? activityModes[0];
}

export function activityModeHref(mode: ActivityMode): string {
  return `#/activity/${mode}`;
}

/** An Activity mode as the origin of a detail link; the timeline's grouping only when it is not the default. */
export function activityOrigin(mode: ActivityMode, by?: TimelineGrouping): TabRoute {
  return { kind: 'tab', tab: 'activity', mode, ...(by === undefined || by === timelineGroupings[0] ? {} : { by }) };
}

/** The timeline's groupings; the first is what `#/activity/timeline` alone shows. */
export const timelineGroupings = ['lane', 'session'] as const satisfies readonly TimelineGrouping[];

/** Pure: the grouping the address names for the timeline (`?by=session`), the default for anything else. */
export function timelineGroupingOf(route: HashRoute): TimelineGrouping {
  if (route.kind !== 'tab' || route.tab !== 'activity' || route.mode !== 'timeline') return timelineGroupings[0];
  return timelineGroupings.find((g) => g === route.by) ?? timelineGroupings[0];
}

export function timelineHref(by: TimelineGrouping): string {
  return tabHref(activityOrigin('timeline', by));
}
