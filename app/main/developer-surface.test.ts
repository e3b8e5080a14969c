import { describe, expect, it } from 'vitest';
import {
  debuggingSwitches,
  developerRoles,
  developerSurface,
  launchSwitchProblem,
  signalledInspectorProblem,
  menuRoles,
  weakeningSwitches,
} from './developer-surface.js';

describe('when the app is packaged', () => {
  it.each(['linux', 'darwin', 'win32'])(
    'on %s: no DevTools and no developer entry anywhere in the menu',
    (platform) => {
      const surface = developerSurface({ isPackaged: true, platform });
      expect(surface.devTools).toBe(false);
      const roles = menuRoles(surface.menu);
      for (const role of developerRoles) expect(roles, role).not.toContain(role);
      // Editing (paste a passphrase) and leaving the app stay.
      expect(roles).toEqual(expect.arrayContaining(['copy', 'paste', 'selectAll', 'minimize']));
    },
  );

  it.each([...debuggingSwitches, ...weakeningSwitches])('refuses to start with --%s', (name) => {
    const problem = launchSwitchProblem({ isPackaged: true, hasSwitch: (asked) => asked === name });
    expect(problem).toContain(`--${name}`);
  });

  it('starts with no debugging switch', () => {
    expect(launchSwitchProblem({ isPackaged: true, hasSwitch: () => false })).toBeUndefined();
  });

  it('names every refused switch it was given', () => {
    const given = new Set(['remote-debugging-port', 'no-sandbox']);
    const problem = launchSwitchProblem({ isPackaged: true, hasSwitch: (name) => given.has(name) });
    expect(problem).toContain('--remote-debugging-port, --no-sandbox');
  });
});

describe('when the app runs unpackaged (a developer, Playwright)', () => {
  it('keeps DevTools and the reload / DevTools entries', () => {
    const surface = developerSurface({ isPackaged: false, platform: 'linux' });
    expect(surface.devTools).toBe(true);
    expect(menuRoles(surface.menu)).toEqual(expect.arrayContaining([...developerRoles]));
  });

  it('lets the debugging switches through (Playwright attaches with them)', () => {
    expect(launchSwitchProblem({ isPackaged: false, hasSwitch: () => true })).toBeUndefined();
  });
});

describe('the menu on macOS', () => {
  it('starts with the app menu, as macOS expects', () => {
    expect(developerSurface({ isPackaged: true, platform: 'darwin' }).menu[0]).toEqual({ role: 'appMenu' });
  });

  it('elsewhere has none', () => {
    expect(menuRoles(developerSurface({ isPackaged: true, platform: 'linux' }).menu)).not.toContain('appMenu');
  });
});

describe('an inspector no switch asked for', () => {
  const url = 'ws://127.0.0.1:9229/5d4e';
  const switches =
    (...names: string[]) =>
    (name: string) =>
      names.includes(name);

  it('is refused: a signal opened it before main held SIGUSR1', () => {
    expect(signalledInspectorProblem({ inspectorUrl: url, hasSwitch: switches() })).toMatch(/opened by a signal/);
    // Parking the port is not asking for an inspector (every launch passes it).
    expect(signalledInspectorProblem({ inspectorUrl: url, hasSwitch: switches('inspect-port') })).toMatch(/signal/);
  });

  it('is let through when --inspect or --inspect-brk asked for it (Playwright), and nothing is said when closed', () => {
    expect(signalledInspectorProblem({ inspectorUrl: url, hasSwitch: switches('inspect') })).toBeUndefined();
    expect(signalledInspectorProblem({ inspectorUrl: url, hasSwitch: switches('inspect-brk') })).toBeUndefined();
    expect(signalledInspectorProblem({ inspectorUrl: undefined, hasSwitch: switches() })).toBeUndefined();
  });
});
