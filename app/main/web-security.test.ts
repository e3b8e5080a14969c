import { describe, expect, it } from 'vitest';
import {
  blockedContentsEvents,
  hardenContents,
  navigationAllowed,
  navigationEvents,
  pageCspProblem,
  permissionAllowed,
  requestAllowed,
  windowWebPreferences,
  type HardenableContents,
  type NavigationEvent,
} from './web-security.js';

/** A plain object shaped like a WebContents: records the open handler and the listeners. */
function fakeContents() {
  const listeners = new Map<string, (event: NavigationEvent, url?: string) => void>();
  let openHandler: ((details: { url: string }) => { action: 'deny' }) | undefined;
  const contents: HardenableContents = {
    setWindowOpenHandler: (handler) => {
      openHandler = handler;
    },
    on: (event, listener) => listeners.set(event, listener),
  };
  /** Emits one event the way Electron does (the URL on the event and as the legacy argument); answers whether its default was prevented. */
  const emit = (name: string, url?: string): boolean => {
    let prevented = false;
    listeners.get(name)?.({ preventDefault: () => (prevented = true), url }, url);
    return prevented;
  };
  return { contents, emit, open: (url: string) => openHandler?.({ url }) };
}

describe('the window', () => {
  it('is isolated and sandboxed, without Node, with web security on', () => {
    expect(windowWebPreferences('/app/preload.cjs', { devTools: false })).toMatchObject({
      preload: '/app/preload.cjs',
      devTools: false,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
    });
  });

  it('has DevTools only when asked (developer builds)', () => {
    expect(windowWebPreferences('/app/preload.cjs', { devTools: true }).devTools).toBe(true);
  });
});

describe('every web contents', () => {
  it('denies window.open for any URL', () => {
    const fake = fakeContents();
    hardenContents(fake.contents);
    expect(fake.open('https://example.com/')).toEqual({ action: 'deny' });
    expect(fake.open('file:///etc/passwd')).toEqual({ action: 'deny' });
  });

  it.each(blockedContentsEvents)('prevents %s, even to our own page', (name) => {
    const fake = fakeContents();
    hardenContents(fake.contents);
    expect(fake.emit(name, 'app://postern/index.html')).toBe(true);
  });

  describe.each(navigationEvents)('%s', (name) => {
    it.each([
      ['our page (a reload)', 'app://postern/index.html', false],
      ['our page with a hash route', 'app://postern/index.html#/activity', false],
      ['another file of our origin', 'app://postern/assets/index.js', true],
      ['our origin with a query', 'app://postern/index.html?x=1', true],
      ['another app:// host', 'app://evil/index.html', true],
      ['a file:// page', 'file:///tmp/index.html', true],
      ['the web', 'https://example.com/', true],
      ['no URL at all', undefined, true],
    ])('to %s: prevented %s', (_what, url, prevented) => {
      const fake = fakeContents();
      hardenContents(fake.contents);
      expect(fake.emit(name, url)).toBe(prevented);
    });
  });

  it('reads the URL from the legacy argument when the event has none', () => {
    expect(navigationAllowed('app://postern/index.html')).toBe(true);
    const listeners: Array<(event: NavigationEvent, url?: string) => void> = [];
    hardenContents({ setWindowOpenHandler: () => undefined, on: (_name, listener) => listeners.push(listener) });
    let prevented = false;
    listeners[0]?.({ preventDefault: () => (prevented = true) }, 'https://example.com/');
    expect(prevented).toBe(true);
  });
});

describe('permissions', () => {
  it.each(['notifications', 'media', 'geolocation', 'clipboard-read', 'openExternal', 'fullscreen'])(
    'refuses %s',
    (permission) => {
      expect(permissionAllowed(permission)).toBe(false);
    },
  );
});

describe('no remote content', () => {
  it.each([
    ['the page', 'app://postern/index.html', true],
    ['a bundled script', 'app://postern/assets/index-abc.js', true],
    ['a traversal attempt (the protocol handler refuses it)', 'app://postern/%2e%2e/secret', true],
    ['another app:// host', 'app://evil/x.js', false],
    ['our host on a port', 'app://postern:8080/x.js', false],
    ['our host with credentials', 'app://u:p@postern/x.js', false],
    ['an https page', 'https://example.com/x.js', false],
    ['plain http on loopback', 'http://127.0.0.1:8080/', false],
    ['a websocket', 'ws://127.0.0.1:1/', false],
    ['a data URL', 'data:text/javascript,alert(1)', false],
    ['a blob URL', 'blob:app://postern/0b1c', false],
    ['any file', 'file:///etc/passwd', false],
    ['garbage', 'not a url', false],
  ])('%s: allowed %s', (_name, url, allowed) => {
    expect(requestAllowed(url, { devTools: false })).toBe(allowed);
  });

  it('lets devtools’ own pages load only in a developer build', () => {
    expect(requestAllowed('devtools://devtools/bundled/inspector.html', { devTools: true })).toBe(true);
    expect(requestAllowed('devtools://devtools/bundled/inspector.html', { devTools: false })).toBe(false);
  });
});

describe('the page’s Content-Security-Policy', () => {
  const meta = (policy: string) =>
    `<head><meta http-equiv="Content-Security-Policy" content="${policy.replaceAll("'", '&#39;')}"></head>`;

  it('accepts the policy the renderer build writes', () => {
    expect(
      pageCspProblem(
        meta("default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'"),
      ),
    ).toBeUndefined();
  });

  it.each([
    ['no meta tag', '<head></head>'],
    ['inline scripts allowed', meta("default-src 'self'; script-src 'self' 'unsafe-inline'; object-src 'none'")],
    ['eval allowed', meta("script-src 'self' 'unsafe-eval'; object-src 'none'")],
    ['a remote script host', meta("script-src 'self' https://cdn.example; object-src 'none'")],
    ['plugins allowed', meta("script-src 'self'")],
    ['neither script-src nor default-src', meta("object-src 'none'")],
  ])('refuses %s', (_name, html) => {
    expect(pageCspProblem(html)).toBeTypeOf('string');
  });
});
