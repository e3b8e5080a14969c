import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  appContentSecurityPolicy,
  appPageUrl,
  appSchemePrivileges,
  appSecurityHeaders,
  handleAppRequest,
  resolveAppUrl,
} from './app-protocol.js';
import { cspProblem } from './web-security.js';

/**
 * A real renderer directory in a temp dir, with a secret beside it (outside the renderer) that no
 * URL may reach: the canary must never appear in any answer.
 */
const canary = 'CANARY-outside-the-renderer-7f3a';
let root = '';
let rendererDir = '';

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'postern-app-protocol-'));
  rendererDir = path.join(root, 'renderer');
  mkdirSync(path.join(rendererDir, 'assets'), { recursive: true });
  writeFileSync(path.join(rendererDir, 'index.html'), '<!doctype html><title>Postern</title>');
  writeFileSync(path.join(rendererDir, 'assets', 'index-abc.js'), 'export {};');
  writeFileSync(path.join(rendererDir, 'assets', 'index-abc.css'), 'body{}');
  writeFileSync(path.join(rendererDir, 'assets', 'index-abc.js.map'), '{}');
  writeFileSync(path.join(rendererDir, 'favicon.svg'), '<svg/>');
  writeFileSync(path.join(rendererDir, '.hidden.js'), canary);
  mkdirSync(path.join(rendererDir, 'folder.js'));
  writeFileSync(path.join(root, 'secret.js'), canary);
  mkdirSync(path.join(`${rendererDir}-evil`));
  writeFileSync(path.join(`${rendererDir}-evil`, 'x.js'), canary);
  // A link inside the renderer that points out of it: resolved, it is outside, so it is refused.
  symlinkSync(path.join(root, 'secret.js'), path.join(rendererDir, 'assets', 'link.js'));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

async function get(url: string, method = 'GET'): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await handleAppRequest(new Request(url, { method }), rendererDir);
  return { status: response.status, headers: response.headers, body: await response.text() };
}

describe('the scheme’s privileges', () => {
  it('are standard, secure and fetch-capable, and never bypass the CSP', () => {
    expect(appSchemePrivileges).toEqual({
      scheme: 'app',
      privileges: expect.objectContaining({
        standard: true,
        secure: true,
        supportFetchAPI: true,
        bypassCSP: false,
        allowServiceWorkers: false,
        corsEnabled: false,
      }),
    });
  });
});

describe('when the request names a file of the renderer', () => {
  it.each([
    ['the page', appPageUrl, 'text/html; charset=utf-8', '<!doctype html><title>Postern</title>'],
    [
      'the origin’s root (the page)',
      'app://postern/',
      'text/html; charset=utf-8',
      '<!doctype html><title>Postern</title>',
    ],
    ['a module script', 'app://postern/assets/index-abc.js', 'text/javascript; charset=utf-8', 'export {};'],
    ['a style sheet', 'app://postern/assets/index-abc.css', 'text/css; charset=utf-8', 'body{}'],
    ['the icon', 'app://postern/favicon.svg', 'image/svg+xml', '<svg/>'],
    [
      'an upper-case host (Chromium lower-cases it)',
      'app://POSTERN/index.html',
      'text/html; charset=utf-8',
      '<!doctype html><title>Postern</title>',
    ],
  ])('%s: 200 with its content type', async (_name, url, contentType, body) => {
    const answer = await get(url);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe(contentType);
    expect(answer.body).toBe(body);
  });

  it('answers HEAD without a body', async () => {
    const answer = await get(appPageUrl, 'HEAD');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('');
  });
});

describe('when the request is hostile or names nothing of ours', () => {
  it.each([
    ['a parent escape', 'app://postern/../secret.js'],
    ['an encoded parent escape', 'app://postern/%2e%2e/secret.js'],
    ['a mixed-case encoded parent', 'app://postern/assets/%2E%2e/%2e%2E/secret.js'],
    ['an encoded slash', 'app://postern/..%2fsecret.js'],
    ['an encoded slash inside a name', 'app://postern/assets%2f..%2f..%2fsecret.js'],
    ['a backslash escape', 'app://postern/assets/..\\..\\secret.js'],
    ['an encoded backslash', 'app://postern/assets/..%5c..%5csecret.js'],
    ['an absolute path in the URL', `app://postern/${encodeURIComponent(path.join(root, 'secret.js'))}`],
    ['a double slash', `app://postern/${path.join(root, 'secret.js')}`],
    ['a sibling folder with the same prefix', `app://postern/..%2f${path.basename(rendererDir)}-evil/x.js`],
    ['a symlink pointing out of the renderer', 'app://postern/assets/link.js'],
    ['a dotfile', 'app://postern/.hidden.js'],
    ['an encoded dotfile', 'app://postern/%2ehidden.js'],
    ['a directory named like a script', 'app://postern/folder.js'],
    ['the assets directory', 'app://postern/assets/'],
    ['a source map (not a served kind)', 'app://postern/assets/index-abc.js.map'],
    ['a missing file', 'app://postern/assets/nope.js'],
    ['a NUL byte', 'app://postern/index.html%00.js'],
    ['a malformed escape', 'app://postern/%E0%A4%A.js'],
    ['a drive letter', 'app://postern/C:%5csecret.js'],
    ['another host', 'app://evil/index.html'],
    ['an empty host', 'app:///index.html'],
    ['a port', 'app://postern:1/index.html'],
    ['a query', `${appPageUrl}?x=1`],
    ['a query that looks like a path', 'app://postern/index.html?../../secret.js'],
    ['another scheme', 'file:///etc/passwd'],
    ['https', 'https://postern/index.html'],
  ])('%s: 404, security headers, nothing of the file', async (_name, url) => {
    const answer = await get(url);
    expect(answer.status).toBe(404);
    expect(answer.body).not.toContain(canary);
    expect(answer.headers.get('content-security-policy')).toBe(appContentSecurityPolicy);
  });

  it.each(['POST', 'PUT', 'DELETE', 'OPTIONS'])('%s: 405 with Allow and the security headers', async (method) => {
    const answer = await get(appPageUrl, method);
    expect(answer.status).toBe(405);
    expect(answer.headers.get('allow')).toBe('GET, HEAD');
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('a URL that is not one is refused by the resolver', () => {
    expect(resolveAppUrl('not a url', rendererDir)).toEqual({ ok: false, reason: 'not a URL' });
  });

  it('credentials in the URL are refused by the resolver (a Request cannot even carry them)', () => {
    expect(resolveAppUrl('app://user:pass@postern/index.html', rendererDir)).toEqual({
      ok: false,
      reason: 'credentials in the URL',
    });
  });
});

describe('every answer’s headers', () => {
  it.each([appPageUrl, 'app://postern/assets/index-abc.js', 'app://postern/../secret.js'])(
    '%s carries every security header',
    async (url) => {
      const answer = await get(url);
      for (const [name, value] of Object.entries(appSecurityHeaders))
        expect(answer.headers.get(name), name).toBe(value);
    },
  );

  it('the CSP passes the same check as the page’s meta tag, and forbids framing', () => {
    expect(cspProblem(appContentSecurityPolicy)).toBeUndefined();
    expect(appContentSecurityPolicy).toContain("frame-ancestors 'none'");
  });
});
