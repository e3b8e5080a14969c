/**
 * What a developer gets and a packaged build does not: DevTools, the reload entries, and the
 * Chromium / Node debugging switches. In a packaged build every one of them is a way for a
 * same-user process to drive the window a person decides in (DevTools' console can call the
 * bridge; a remote-debugging port lets any local process script the page), so they are off.
 * Pure (the menu is plain MenuItemConstructorOptions-shaped data), tested without Electron.
 */

/** The menu roles main uses; Electron's MenuItemConstructorOptions accepts each. */
export type MenuRole =
  | 'appMenu'
  | 'quit'
  | 'close'
  | 'undo'
  | 'redo'
  | 'cut'
  | 'copy'
  | 'paste'
  | 'selectAll'
  | 'minimize'
  | 'zoom'
  | 'reload'
  | 'forceReload'
  | 'toggleDevTools'
  | 'togglefullscreen';

export interface MenuEntry {
  readonly role?: MenuRole;
  readonly label?: string;
  readonly type?: 'separator';
  readonly submenu?: readonly MenuEntry[];
}

/** Roles that reach the page's internals or reload it outside the app's control: developer builds only. */
export const developerRoles: ReadonlySet<MenuRole> = new Set(['reload', 'forceReload', 'toggleDevTools']);

/**
 * Launch switches that open a debugging door into the app: Chromium's remote debugging (a CDP
 * endpoint any local process can connect to and script the window with) and Node's inspector
 * (the inspect fuse already ignores the --inspect family in a packaged binary; checked here too,
 * so an unfused build refuses them as well).
 */
export const debuggingSwitches = [
  'remote-debugging-port',
  'remote-debugging-pipe',
  'remote-debugging-address',
  'inspect',
  'inspect-brk',
  'inspect-port',
] as const;

/**
 * Chromium switches that switch off a checklist item for every renderer (the sandbox, the
 * same-origin policy, site isolation). A same-user agent can relaunch the app with them, so a
 * packaged build refuses them too. (Where unprivileged user namespaces are off, the .deb's setuid
 * sandbox helper is the way to run the sandbox, not --no-sandbox: docs/desktop.md.)
 */
export const weakeningSwitches = ['no-sandbox', 'disable-web-security', 'disable-site-isolation-trials'] as const;

export interface DeveloperSurface {
  /** webPreferences.devTools for every window. */
  readonly devTools: boolean;
  /** The application menu (Menu.buildFromTemplate → Menu.setApplicationMenu), replacing Electron's default. */
  readonly menu: readonly MenuEntry[];
}

export function developerSurface(options: { isPackaged: boolean; platform: string }): DeveloperSurface {
  const developer = !options.isPackaged;
  const menu: MenuEntry[] = [];
  if (options.platform === 'darwin') menu.push({ role: 'appMenu' });
  menu.push({ label: 'File', submenu: [{ role: options.platform === 'darwin' ? 'close' : 'quit' }] });
  // Editing stays: passphrases and config are pasted into the window.
  menu.push({
    label: 'Edit',
    submenu: [
      { role: 'undo' },
      { role: 'redo' },
      { type: 'separator' },
      { role: 'cut' },
      { role: 'copy' },
      { role: 'paste' },
      { role: 'selectAll' },
    ],
  });
  const view: MenuEntry[] = [{ role: 'togglefullscreen' }];
  if (developer)
    view.unshift({ role: 'reload' }, { role: 'forceReload' }, { role: 'toggleDevTools' }, { type: 'separator' });
  menu.push({ label: 'View', submenu: view });
  menu.push({ label: 'Window', submenu: [{ role: 'minimize' }, { role: 'zoom' }, { role: 'close' }] });
  return { devTools: developer, menu };
}

/** Every role anywhere in a menu, depth first. */
export function menuRoles(menu: readonly MenuEntry[]): MenuRole[] {
  return menu.flatMap((entry) => [
    ...(entry.role === undefined ? [] : [entry.role]),
    ...menuRoles(entry.submenu ?? []),
  ]);
}

/**
 * Why a packaged build must not start with the command line it got (undefined when it may). A
 * developer build may: that is how Playwright and a developer attach.
 */
export function launchSwitchProblem(options: {
  isPackaged: boolean;
  hasSwitch: (name: string) => boolean;
}): string | undefined {
  if (!options.isPackaged) return undefined;
  const present = [...debuggingSwitches, ...weakeningSwitches].filter((name) => options.hasSwitch(name));
  if (present.length === 0) return undefined;
  const names = present.map((name) => `--${name}`).join(', ');
  return `Postern does not start with ${names}: a debugging door or a weakened sandbox would let another program drive the window where a person decides`;
}

/**
 * Why the app must not go on with node's inspector open (undefined when it may): open though no `--inspect` or
 * `--inspect-brk` switch asked for it, a `kill -USR1` from another process of the user opened it before main's first
 * import held the signal (broker/host/inspector-guard.ts). Whoever connected may already run code here, so closing it is
 * not enough. A developer build started with `--inspect=0` (Playwright) may.
 */
export function signalledInspectorProblem(options: {
  inspectorUrl: string | undefined;
  hasSwitch: (name: string) => boolean;
}): string | undefined {
  if (options.inspectorUrl === undefined) return undefined;
  if (options.hasSwitch('inspect') || options.hasSwitch('inspect-brk')) return undefined;
  return "node's inspector was opened by a signal from another process before Postern could refuse it; Postern does not run with it open (start it again)";
}
