/**
 * The answer to the printed operator URL: the operator UI's own page (dist/renderer/index.html) with the fresh
 * session secret in a meta element (broker/contract/operator-sign-in.ts). The UI's script takes it into memory,
 * removes the element and replaces the tokened URL in the tab's history with the path (and #view) the operator asked
 * for (renderer/src/api/page-session.ts). The secret never goes into a URL (history, Referer), a cookie (sent to every
 * port of 127.0.0.1) or browser storage (written into the profile on disk); the answer is `no-store`.
 */
import { operatorSignInMeta } from '../contract/operator-sign-in.js';

/**
 * The UI's page with the sign-in element first in its head: after `<head>`, or where the parser opens the head
 * implicitly (after `<html>` or the doctype) in a page that omits it. `next` must already be a same-origin path
 * (sameOriginPath).
 */
export function signInDocument(indexHtml: string, session: string, next: string): string {
  const opening = [/<head(?:\s[^>]*)?>/i, /<html(?:\s[^>]*)?>/i, /<!doctype[^>]*>/i]
    .map((tag) => tag.exec(indexHtml))
    .find((match) => match !== null);
  const at = opening === undefined || opening === null ? 0 : opening.index + opening[0].length;
  const element = `<meta name="${operatorSignInMeta}" content="${escapeAttribute(session)}" data-next="${escapeAttribute(next)}">`;
  return indexHtml.slice(0, at) + element + indexHtml.slice(at);
}

/**
 * The path (and query) to go to after sign-in, or "/" when it would leave the origin. A browser
 * reads `//host/x` and `/\\host/x` as another host, and the URL parser turns `/.//host/x` into
 * `//host/x`, so only a path that starts with exactly one "/" followed by neither "/" nor "\\" stays.
 */
export function sameOriginPath(pathname: string, search: string): string {
  const candidate = pathname + search;
  return /^\/(?![/\\])/.test(candidate) ? candidate : '/';
}

function escapeAttribute(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;');
}
