import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { contentSecurityPolicy, securityHeaders } from '../../broker/host/index.js';

/**
 * The renderer is served from `app://postern/…`, a custom privileged scheme, not from `file://`:
 * a file:// page needs the grantFileProtocolExtraPrivileges fuse for its module scripts, may read
 * any file its origin reaches, and never gets response headers (so its CSP could only be a meta
 * tag). Here every response — the refusals too — carries the CSP and the security headers, and a
 * request reaches only a regular file inside the bundled renderer directory. No Electron import:
 * main.ts hands `handleAppRequest` to `protocol.handle`, and the tests call it with real
 * Request objects against a real directory.
 */

export const appScheme = 'app';
export const appHost = 'postern';
export const appOrigin = `${appScheme}://${appHost}`;
/** The one page: the IPC gate answers only a top frame showing exactly this URL. */
export const appPageUrl = `${appOrigin}/index.html`;

/**
 * For `protocol.registerSchemesAsPrivileged`, before `ready`. standard: real origins, relative URLs
 * and 'self' in the CSP; secure: a secure context like https; supportFetchAPI: module scripts load
 * through fetch. Never bypassCSP, no service workers, no CORS from other origins, no code cache.
 */
export const appSchemePrivileges = {
  scheme: appScheme,
  privileges: {
    standard: true,
    secure: true,
    supportFetchAPI: true,
    bypassCSP: false,
    allowServiceWorkers: false,
    corsEnabled: false,
    stream: false,
    codeCache: false,
  },
} as const;

/**
 * The policy the built page's meta tag carries, plus frame-ancestors, which only a header can set: the same
 * policy and headers the headless operator host sends, so the page runs under one policy wherever it is served.
 */
export const appContentSecurityPolicy = contentSecurityPolicy;

/** Sent on every response, refusals included. */
export const appSecurityHeaders: Readonly<Record<string, string>> = securityHeaders;

/** A closed set: a file of any other kind (source maps, a stray binary) is not served. */
export const appContentTypes: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
};

/** The renderer's largest file is ~300 KB; anything far beyond it is not ours. */
export const appFileBytesMax = 8 * 1024 * 1024;

export type AppTarget =
  | { readonly ok: true; readonly file: string; readonly contentType: string }
  | { readonly ok: false; readonly reason: string };

/**
 * Pure: the file under `rendererDir` that a request URL names, or why it names none. Each path
 * segment is decoded once and must be a plain name: no empty, `.` or `..` segment, no `/` or `\`
 * inside one (so `%2f`, `%5c`, `%2e%2e` cannot smuggle a separator or a parent), no NUL, no `:`
 * (a drive letter), no leading dot. The URL must be exactly our origin: no other host, port, user
 * or query.
 */
export function resolveAppUrl(url: string, rendererDir: string): AppTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: 'not a URL' };
  }
  if (parsed.protocol !== `${appScheme}:`) return { ok: false, reason: 'another scheme' };
  if (parsed.hostname.toLowerCase() !== appHost || parsed.port !== '') return { ok: false, reason: 'another host' };
  if (parsed.username !== '' || parsed.password !== '') return { ok: false, reason: 'credentials in the URL' };
  if (parsed.search !== '') return { ok: false, reason: 'a query' };
  if (!parsed.pathname.startsWith('/') && parsed.pathname !== '') return { ok: false, reason: 'not an absolute path' };
  const raw = parsed.pathname === '' || parsed.pathname === '/' ? ['index.html'] : parsed.pathname.slice(1).split('/');
  const segments: string[] = [];
  for (const encoded of raw) {
    let segment: string;
    try {
      segment = decodeURIComponent(encoded);
    } catch {
      return { ok: false, reason: 'a malformed escape' };
    }
    if (!plainName(segment)) return { ok: false, reason: 'a path segment that is not a plain name' };
    segments.push(segment);
  }
  const file = path.resolve(rendererDir, ...segments);
  const relative = path.relative(path.resolve(rendererDir), file);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative))
    return { ok: false, reason: 'outside the renderer' };
  const contentType = appContentTypes[path.extname(file).toLowerCase()];
  if (contentType === undefined) return { ok: false, reason: 'a kind of file the UI does not serve' };
  return { ok: true, file, contentType };
}

function plainName(segment: string): boolean {
  if (segment === '' || segment.startsWith('.') || /[/\\:]/.test(segment)) return false;
  // No control character (NUL included): a name the file system might cut short or read differently.
  for (let i = 0; i < segment.length; i += 1) {
    const code = segment.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return false;
  }
  return true;
}

/**
 * The protocol handler: GET/HEAD of a regular file inside the renderer directory (after symlinks
 * are resolved, so a link cannot point out of it) answers 200; everything else 404 (405 for other
 * methods). Every answer carries the security headers.
 */
export async function handleAppRequest(request: Request, rendererDir: string): Promise<Response> {
  if (request.method !== 'GET' && request.method !== 'HEAD') return refuse(405, { Allow: 'GET, HEAD' });
  const target = resolveAppUrl(request.url, rendererDir);
  if (!target.ok) return refuse(404);
  const body = await readInside(target.file, rendererDir);
  if (body === undefined) return refuse(404);
  const headers = {
    ...appSecurityHeaders,
    'Content-Type': target.contentType,
    'Content-Length': String(body.byteLength),
  };
  return new Response(request.method === 'HEAD' ? null : body, { status: 200, headers });
}

/**
 * The file's bytes when it is a regular file whose real path is inside the renderer's real path.
 * fs's callback functions, looked up at call time: those are the ones Electron teaches to read
 * inside app.asar.
 */
async function readInside(file: string, rendererDir: string): Promise<Uint8Array | undefined> {
  const realpath = promisify(fs.realpath);
  const stat = promisify(fs.stat);
  const readFile = promisify(fs.readFile);
  try {
    const [realFile, realDir] = await Promise.all([realpath(file), realpath(rendererDir)]);
    const relative = path.relative(realDir, realFile);
    if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return undefined;
    const info = await stat(realFile);
    if (!info.isFile() || info.size > appFileBytesMax) return undefined;
    return new Uint8Array(await readFile(realFile));
  } catch {
    return undefined;
  }
}

function refuse(status: 404 | 405, extra: Record<string, string> = {}): Response {
  const body = status === 404 ? 'Not found.' : 'Method not allowed.';
  return new Response(body, {
    status,
    headers: { ...appSecurityHeaders, ...extra, 'Content-Type': 'text/plain; charset=utf-8' },
  });
}
