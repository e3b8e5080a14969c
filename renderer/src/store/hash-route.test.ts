import { describe, expect, it } from 'vitest';
import {
  actionHref,
  activityModeHref,
  activityModeOf,
  activityModes,
  activityOrigin,
  backOf,
  parseHashRoute,
  tabChoiceHref,
  tabHref,
  tabOrigin,
  timelineGroupingOf,
  timelineGroupings,
  timelineHref,
} from './hash-route.js';
import { consoleTabs, tabIds, tabLabel } from './tabs.js';

describe('the hash route', () => {
  it.each([
    ['', { kind: 'none' }],
    ['#/activity', { kind: 'tab', tab: 'activity' }],
    ['#metrics', { kind: 'tab', tab: 'metrics' }],
    ['#/action/act_0123abcd', { kind: 'action', actionId: 'act_0123abcd' }],
    ['#/action/ses_1', { kind: 'none' }],
    ['#/action/act_x/more', { kind: 'none' }],
    ['#/Activity<script>', { kind: 'none' }],
    ['#/activity/timeline', { kind: 'tab', tab: 'activity', mode: 'timeline' }],
    ['#/activity/Timeline', { kind: 'none' }],
    ['#/activity/timeline/x', { kind: 'none' }],
    ['#/activity/', { kind: 'none' }],
    ['#/activity/timeline?by=session', { kind: 'tab', tab: 'activity', mode: 'timeline', by: 'session' }],
    ['#/activity/timeline?by=Session&x=1', { kind: 'tab', tab: 'activity', mode: 'timeline' }],
    ['#/activity?by=lane', { kind: 'tab', tab: 'activity', by: 'lane' }],
    [
      '#/action/act_1?from=activity/timeline&by=session',
      { kind: 'action', actionId: 'act_1', from: { kind: 'tab', tab: 'activity', mode: 'timeline', by: 'session' } },
    ],
    [
      '#/action/act_1?from=activity/events',
      { kind: 'action', actionId: 'act_1', from: { kind: 'tab', tab: 'activity', mode: 'events' } },
    ],
    ['#/action/act_1?from=https://evil.example/', { kind: 'action', actionId: 'act_1' }],
    ['#/action/act_1?from=activity/timeline/x', { kind: 'action', actionId: 'act_1' }],
  ])('reads %j as %j', (hash, route) => {
    expect(parseHashRoute(hash)).toEqual(route);
  });

  it('round-trips an action id through its link', () => {
    expect(parseHashRoute(actionHref('act_e2e-seed_0001'))).toEqual({ kind: 'action', actionId: 'act_e2e-seed_0001' });
  });

  it.each([
    ['#/activity', 'actions'],
    ['#/activity/actions', 'actions'],
    ['#/activity/timeline', 'timeline'],
    ['#/activity/events', 'events'],
    ['#/activity/nonsense', 'actions'],
    ['#/metrics/timeline', 'actions'],
    ['#/action/act_1', 'actions'],
  ])('shows the Activity mode of %j as %s', (hash, mode) => {
    expect(activityModeOf(parseHashRoute(hash))).toBe(mode);
  });

  it('round-trips every Activity mode through its link', () => {
    for (const mode of activityModes) expect(activityModeOf(parseHashRoute(activityModeHref(mode)))).toBe(mode);
  });

  it('round-trips every timeline grouping through its link, the default without an option', () => {
    expect(timelineHref('lane')).toBe('#/activity/timeline');
    expect(timelineHref('session')).toBe('#/activity/timeline?by=session');
    for (const by of timelineGroupings) expect(timelineGroupingOf(parseHashRoute(timelineHref(by)))).toBe(by);
  });

  it.each([
    ['#/activity/timeline?by=session', 'session'],
    ['#/activity/timeline?by=nonsense', 'lane'],
    ['#/activity/actions?by=session', 'lane'],
    ['#/metrics/timeline?by=session', 'lane'],
  ])('groups the timeline of %j by %s', (hash, by) => {
    expect(timelineGroupingOf(parseHashRoute(hash))).toBe(by);
  });

  describe('the address a tab click leaves', () => {
    it.each([
      ['', 'approvals'],
      ['', 'status'],
      ['#/status', 'approvals'],
      ['#/activity/timeline?by=session', 'approvals'],
      ['#/action/act_1?from=activity/events', 'approvals'],
      ['#/activity/events', 'activity'],
      ['#/nonsense/x/y', 'approvals'],
    ])('from %j names %s, which a reload or a re-sign-in reads back', (before, tab) => {
      const href = tabChoiceHref(parseHashRoute(before), tab);
      expect(href).toBe(`#/${tab}`);
      expect(parseHashRoute(href ?? '')).toEqual({ kind: 'tab', tab });
    });

    it('writes nothing when the address names that tab already', () => {
      expect(tabChoiceHref(parseHashRoute('#/approvals'), 'approvals')).toBeNull();
      expect(tabChoiceHref(parseHashRoute('#metrics'), 'metrics')).toBeNull();
    });
  });

  describe('the back link of an action detail', () => {
    it.each([
      [activityOrigin('actions'), '#/activity/actions'],
      [activityOrigin('timeline'), '#/activity/timeline'],
      [activityOrigin('timeline', 'session'), '#/activity/timeline?by=session'],
      [activityOrigin('events'), '#/activity/events'],
    ])('returns from a detail opened in %j to %s, reloaded or not', (origin, href) => {
      const route = parseHashRoute(actionHref('act_e2e-seed_0001', origin));
      expect(route).toEqual({ kind: 'action', actionId: 'act_e2e-seed_0001', from: origin });
      expect(backOf(route, 'status')).toEqual({ href, tab: 'activity' });
      expect(tabHref(origin)).toBe(href);
    });

    // The console's tabs written out, not read from the list the parser uses: a tab the tab list lost, or one an
    // address could no longer name, fails here.
    const consoleTabsSpec = [
      ['approvals', 'Approvals'],
      ['sessions', 'Sessions'],
      ['activity', 'Activity'],
      ['metrics', 'Metrics'],
      ['status', 'Status'],
      ['vault', 'Vault'],
      ['credentials', 'Credentials'],
      ['routes', 'Routes & hosts'],
    ] as const;

    it('knows the tab list, in its order, and the guide as the only address that is not a tab', () => {
      expect(consoleTabs.map((t) => [t.id, t.label])).toEqual(consoleTabsSpec);
      expect(tabIds).toEqual([...consoleTabsSpec.map(([id]) => id), 'welcome']);
    });

    it.each([...consoleTabsSpec, ['welcome', 'First run']] as const)(
      'returns from a detail opened on %s to it, reloaded or not, named %j',
      (tab, label) => {
        const href = actionHref('act_e2e-seed_0001', tabOrigin(tab));
        expect(href).toBe(`#/action/act_e2e-seed_0001?from=${tab}`);
        // Opened while another tab is shown: the origin wins.
        const shown = tab === 'status' ? 'approvals' : 'status';
        expect(backOf(parseHashRoute(href), shown)).toEqual({ href: `#/${tab}`, tab });
        expect(tabLabel(backOf(parseHashRoute(href), shown).tab)).toBe(label);
      },
    );

    it.each([
      ['an unknown tab', 'nonsense'],
      ['a name-shaped word of the runtime', 'constructor'],
      ['another page', 'https://evil.example/'],
      ['a script address', 'javascript:alert(1)'],
      ['markup', '<img src=x onerror=alert(1)>'],
      ['markup, escaped', '%3Cscript%3E'],
      ['a mode Activity does not have', 'activity/nonsense'],
      ['a mode on a tab without modes', 'approvals/timeline'],
      ['a path too deep', 'approvals/x/y'],
      ['nothing', ''],
    ])('reads an origin of %s (%j) as none: back returns to the tab shown', (_, from) => {
      const route = parseHashRoute(`#/action/act_1?from=${encodeURIComponent(from)}`);
      expect(route).toEqual({ kind: 'action', actionId: 'act_1' });
      expect(backOf(route, 'approvals')).toEqual({ href: '#/approvals', tab: 'approvals' });
      expect(JSON.stringify(backOf(route, 'approvals'))).not.toContain(from || 'from');
    });

    it('keeps a known origin and drops a grouping it does not have: the default one', () => {
      expect(parseHashRoute('#/action/act_1?from=activity/timeline&by=evil')).toEqual({
        kind: 'action',
        actionId: 'act_1',
        from: activityOrigin('timeline'),
      });
      expect(parseHashRoute('#/action/act_1?from=approvals&by=session')).toEqual({
        kind: 'action',
        actionId: 'act_1',
        from: tabOrigin('approvals'),
      });
      expect(parseHashRoute('#/action/act_1?from=activity/events&by=session')).toEqual({
        kind: 'action',
        actionId: 'act_1',
        from: activityOrigin('events'),
      });
    });

    it('without an origin, returns to the tab shown', () => {
      expect(backOf(parseHashRoute(actionHref('act_1')), 'approvals')).toEqual({
        href: '#/approvals',
        tab: 'approvals',
      });
      expect(backOf({ kind: 'none' }, 'activity')).toEqual({ href: '#/activity', tab: 'activity' });
    });
  });
});
