import { appHost, appPageUrl, appScheme } from './app-protocol.js';

/**
 * The Electron security checklist as small pure rules (no Electron import: tests give them plain
 * objects shaped like Electron's events). main.ts wires each one to its Electron hook.
 */

/**
 * Every window: isolated, sandboxed, no Node in the page, web security on, nothing insecure.
 * DevTools only in an unpackaged (developer) build: see developerSurface in developer-surface.ts.
 */
export function windowWebPreferences(preloadPath: string, options: { devTools: boolean }) {
  return {
    preload: preloadPath,
    devTools: options.devTools,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    nodeIntegrationInWorker: false,
    nodeIntegrationInSubFrames: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
    experimentalFeatures: false,
    webviewTag: false,
    navigateOnDragDrop: false,
    spellcheck: false,
  } as const;
}

/** What Electron passes a navigation listener: the event (with `url` since Electron 25) and, in the legacy form, the URL. */
export type NavigationEvent = { preventDefault(): void; readonly url?: string };

/** The parts of a WebContents the hardening touches (Electron's WebContents has them all). */
export interface HardenableContents {
  setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' }): void;
  on(event: HardenedEvent, listener: (event: NavigationEvent, url?: string) => void): unknown;
}

/** Navigations: allowed only to our own page (a reload); anything else is prevented. */
export const navigationEvents = ['will-navigate', 'will-frame-navigate'] as const;
/** Events whose default (redirecting, attaching a webview) is always prevented. */
export const blockedContentsEvents = ['will-redirect', 'will-attach-webview'] as const;
export type HardenedEvent = (typeof navigationEvents)[number] | (typeof blockedContentsEvents)[number];

/**
 * No window.open, no redirects, no webviews, and no navigation except to our own page — for every
 * web contents the app ever creates. The page is a single-page app with hash routes (which emit no
 * will-navigate), so the only navigation it makes is a reload of itself; the IPC gate answers only
 * that page, so a navigation anywhere else would leave the window without a bridge anyway.
 */
export function hardenContents(contents: HardenableContents): void {
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
  for (const name of navigationEvents) {
    contents.on(name, (event, url) => {
      if (!navigationAllowed(event.url ?? url)) event.preventDefault();
    });
  }
  for (const name of blockedContentsEvents) contents.on(name, (event) => event.preventDefault());
}

/** Our page, with or without a hash route; nothing else of any origin (not even another file of ours). */
export function navigationAllowed(url: string | undefined): boolean {
  if (url === undefined) return false;
  const hash = url.indexOf('#');
  return (hash === -1 ? url : url.slice(0, hash)) === appPageUrl;
}

/** Every permission (camera, notifications from the page, clipboard, …) is refused: the UI needs none. */
export function permissionAllowed(_permission: string): false {
  return false;
}

/**
 * No remote content: a request from any web contents may go only to our own origin,
 * `app://postern` (whose protocol handler decides which files exist), or — in a developer build
 * only — to devtools' own pages. http(s), ws, data:, blob:, file: and other hosts are cancelled.
 */
export function requestAllowed(url: string, options: { devTools: boolean }): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol === 'devtools:') return options.devTools;
  if (parsed.protocol !== `${appScheme}:`) return false;
  return (
    parsed.hostname.toLowerCase() === appHost && parsed.port === '' && parsed.username === '' && parsed.password === ''
  );
}

/**
 * The built page must carry a Content-Security-Policy meta tag that passes `cspProblem`
 * (renderer/vite.config.ts adds it). The app:// handler sends the policy as a header too; the meta
 * tag is kept so the page stays safe wherever it is shown. main refuses to show a page without it.
 */
export function pageCspProblem(html: string): string | undefined {
  const meta = /<meta\s+http-equiv=["']Content-Security-Policy["']\s+content=["']([^"']*)["']/i.exec(html);
  if (meta?.[1] === undefined) return 'the page has no Content-Security-Policy meta tag';
  return cspProblem(decodeEntities(meta[1]));
}

/** Why a policy is too loose: its script-src (or default-src) must be exactly 'self', and object-src 'none'. */
export function cspProblem(policy: string): string | undefined {
  const directives = new Map(
    policy
      .split(';')
      .map((part) => part.trim().split(/\s+/))
      .filter((words) => words[0] !== undefined && words[0] !== '')
      .map((words) => [words[0]?.toLowerCase() ?? '', words.slice(1)]),
  );
  const scripts = directives.get('script-src') ?? directives.get('default-src');
  if (scripts === undefined) return 'the policy names neither script-src nor default-src';
  if (scripts.length !== 1 || scripts[0] !== "'self'") return `script-src is "${scripts.join(' ')}", not 'self' alone`;
  if (directives.get('object-src')?.join(' ') !== "'none'") return "object-src is not 'none'";
  return undefined;
}

function decodeEntities(text: string): string {
  return text
    .replace(/&#39;|&#x27;|&apos;/gi, "'")
    .replace(/&quot;/gi, '"')
    .replace(/&amp;/gi, '&');
}
