import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The Electron security checklist as small pure rules (no Electron import: tests give them plain
 * objects shaped like Electron's events). main.ts wires each one to its Electron hook.
 */

/** Every window: isolated, sandboxed, no Node in the page, web security on, nothing insecure. */
export function windowWebPreferences(preloadPath: string) {
  return {
    preload: preloadPath,
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

/** The parts of a WebContents the hardening touches (Electron's WebContents has them all). */
export interface HardenableContents {
  setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' }): void;
  on(event: 'will-navigate' | 'will-frame-navigate' | 'will-redirect' | 'will-attach-webview', listener: (event: { preventDefault(): void }) => void): unknown;
}

/** Events whose default (navigating, redirecting, attaching a webview) is always prevented. */
export const blockedContentsEvents = ['will-navigate', 'will-frame-navigate', 'will-redirect', 'will-attach-webview'] as const;

/**
 * No window.open, no navigation away from the page, no redirects, no webviews — for every web
 * contents the app ever creates. The page is a single-page app: it never navigates, so there is
 * nothing to allow (in-page fragment changes do not emit will-navigate).
 */
export function hardenContents(contents: HardenableContents): void {
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
  for (const name of blockedContentsEvents) contents.on(name, (event) => event.preventDefault());
}

/** Every permission (camera, notifications from the page, clipboard, …) is refused: the UI needs none. */
export function permissionAllowed(_permission: string): false {
  return false;
}

/**
 * No remote content: a request from any web contents may load only files inside the bundled
 * renderer directory (and devtools' own pages). http(s), ws, data: and other files are cancelled.
 */
export function requestAllowed(url: string, rendererDir: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol === 'devtools:') return true;
  if (parsed.protocol !== 'file:') return false;
  let file: string;
  try {
    file = fileURLToPath(parsed);
  } catch {
    return false;
  }
  const relative = path.relative(rendererDir, path.resolve(file));
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}

/**
 * The built page must carry a Content-Security-Policy meta tag whose script-src is exactly 'self'
 * (renderer/vite.config.ts adds it; webRequest's header hook never runs for file:// pages, so the
 * meta tag is what holds there). main refuses to show a page without it.
 */
export function pageCspProblem(html: string): string | undefined {
  const meta = /<meta\s+http-equiv=["']Content-Security-Policy["']\s+content=["']([^"']*)["']/i.exec(html);
  if (meta?.[1] === undefined) return 'the page has no Content-Security-Policy meta tag';
  const policy = decodeEntities(meta[1]);
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
  return text.replace(/&#39;|&#x27;|&apos;/gi, "'").replace(/&quot;/gi, '"').replace(/&amp;/gi, '&');
}
