import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { blockedContentsEvents, hardenContents, pageCspProblem, permissionAllowed, requestAllowed, windowWebPreferences, type HardenableContents } from './web-security.js';

/** A plain object shaped like a WebContents: records the open handler and the listeners. */
function fakeContents() {
  const listeners = new Map<string, (event: { preventDefault(): void }) => void>();
  let openHandler: ((details: { url: string }) => { action: 'deny' }) | undefined;
  const contents: HardenableContents = {
    setWindowOpenHandler: (handler) => {
      openHandler = handler;
    },
    on: (event, listener) => listeners.set(event, listener),
  };
  /** Emits one event the way Electron does; answers whether its default was prevented. */
  const emit = (name: string): boolean => {
    let prevented = false;
    listeners.get(name)?.({ preventDefault: () => (prevented = true) });
    return prevented;
  };
  return { contents, emit, open: (url: string) => openHandler?.({ url }) };
}

describe('the window', () => {
  it('is isolated and sandboxed, without Node, with web security on', () => {
    expect(windowWebPreferences('/app/preload.cjs')).toMatchObject({
      preload: '/app/preload.cjs',
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
});

describe('every web contents', () => {
  it('denies window.open for any URL', () => {
    const fake = fakeContents();
    hardenContents(fake.contents);
    expect(fake.open('https://example.com/')).toEqual({ action: 'deny' });
    expect(fake.open('file:///etc/passwd')).toEqual({ action: 'deny' });
  });

  it.each(blockedContentsEvents)('prevents %s', (name) => {
    const fake = fakeContents();
    hardenContents(fake.contents);
    expect(fake.emit(name)).toBe(true);
  });
});

describe('permissions', () => {
  it.each(['notifications', 'media', 'geolocation', 'clipboard-read', 'openExternal', 'fullscreen'])('refuses %s', (permission) => {
    expect(permissionAllowed(permission)).toBe(false);
  });
});

describe('no remote content', () => {
  const rendererDir = path.resolve('/opt/Postern/resources/app.asar/dist/renderer');
  const inside = (file: string) => pathToFileURL(path.join(rendererDir, file)).href;

  it.each([
    ['the page', inside('index.html'), true],
    ['a bundled script', inside('assets/index-abc.js'), true],
    ['devtools', 'devtools://devtools/bundled/inspector.html', true],
    ['an https page', 'https://example.com/x.js', false],
    ['plain http on loopback', 'http://127.0.0.1:8080/', false],
    ['a websocket', 'ws://127.0.0.1:1/', false],
    ['a data URL', 'data:text/javascript,alert(1)', false],
    ['a file outside the renderer', 'file:///etc/passwd', false],
    ['a sibling folder with the same prefix', pathToFileURL(`${rendererDir}-evil/x.js`).href, false],
    ['an escape through ..', `${pathToFileURL(rendererDir).href}/../../secret`, false],
    ['the folder itself', pathToFileURL(rendererDir).href, false],
    ['garbage', 'not a url', false],
  ])('%s: allowed %s', (_name, url, allowed) => {
    expect(requestAllowed(url, rendererDir)).toBe(allowed);
  });
});

describe('the page’s Content-Security-Policy', () => {
  const meta = (policy: string) => `<head><meta http-equiv="Content-Security-Policy" content="${policy.replaceAll("'", '&#39;')}"></head>`;

  it('accepts the policy the renderer build writes', () => {
    expect(pageCspProblem(meta("default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'"))).toBeUndefined();
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
