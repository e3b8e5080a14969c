/**
 * The console's tabs, in the tab list's order, each with its label (the tab's and a detail's back link's, `← Approvals`).
 * The one list: the tab list (app.tsx) shows these, and the addresses that name a tab (hash-route.ts) are these and the
 * guide's, so a tab cannot be in one and not the other.
 */
export const consoleTabs = [
  { id: 'approvals', label: 'Approvals' },
  { id: 'sessions', label: 'Sessions' },
  { id: 'activity', label: 'Activity' },
  { id: 'metrics', label: 'Metrics' },
  { id: 'status', label: 'Status' },
  { id: 'vault', label: 'Vault' },
  { id: 'credentials', label: 'Credentials' },
  { id: 'routes', label: 'Routes & hosts' },
] as const;

/** The first-run guide: an address (`#/welcome`) and a heading, but no tab; its strip offers it while the data directory is fresh. */
export const guideTab = { id: 'welcome', label: 'First run' } as const;

export type TabId = (typeof consoleTabs)[number]['id'] | typeof guideTab.id;

/** The tabs an address can name: the tab list's, then the guide's. */
export const tabIds: readonly TabId[] = [...consoleTabs.map((t) => t.id), guideTab.id];

/** A tab's label, as a detail's back link names it (`← Approvals`); the guide by its heading; anything else `Back`. */
export function tabLabel(id: string): string {
  return [...consoleTabs, guideTab].find((t) => t.id === id)?.label ?? 'Back';
}
