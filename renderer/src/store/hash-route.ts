/**
 * The address's hash names what the shell shows, so a view can be linked and reloaded:
 * `#/activity`, `#/metrics` (any tab by its id) or `#/action/<action_id>` (one action's detail).
 */
export type HashRoute = { kind: 'none' } | { kind: 'tab'; tab: string } | { kind: 'action'; actionId: string };

/** Action ids as the broker issues them (act_…); the bound matches actions.show's input. */
const actionIdPattern = /^act_[A-Za-z0-9_-]{1,76}$/;

/** Pure: the route a hash names; anything unrecognised is no route (the shell keeps its tab). */
export function parseHashRoute(hash: string): HashRoute {
  const parts = hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'action' && parts.length === 2) {
    const actionId = decodeURIComponent(parts[1] ?? '');
    return actionIdPattern.test(actionId) ? { kind: 'action', actionId } : { kind: 'none' };
  }
  if (parts.length === 1 && /^[a-z][a-z-]{0,30}$/.test(parts[0] ?? '')) return { kind: 'tab', tab: parts[0] ?? '' };
  return { kind: 'none' };
}

export function actionHref(actionId: string): string {
  return `#/action/${encodeURIComponent(actionId)}`;
}
