/**
 * The page the printed operator URL answers with. It carries the fresh session secret in a meta
 * tag; the script (served from this origin, as the CSP requires) moves it into sessionStorage and
 * replaces the tokened URL in the tab's history with the path (and #view) the operator asked for. The secret
 * never goes into a URL (history, Referer) or a cookie (sent to every port of 127.0.0.1).
 */

/** Where the browser keeps the session secret; renderer/src/api/http-operator-api.ts reads the same key. */
export const operatorSessionKey = 'postern.operatorSession';

export const signInScriptPath = '/__postern/sign-in.js';

export const signInScript = `'use strict';
(function () {
  var meta = document.querySelector('meta[name="postern-session"]');
  if (meta === null) return;
  sessionStorage.setItem(${JSON.stringify(operatorSessionKey)}, meta.getAttribute('content'));
  var next = meta.getAttribute('data-next');
  meta.remove();
  // The fragment never reached the server; keep it so a link to a view (#/activity/timeline) opens that view.
  location.replace(next + location.hash);
})();
`;

/** `next` must already be a same-origin path (see sameOriginPath); it is escaped for the attribute. */
export function signInPage(session: string, next: string): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>Postern: signing in</title>',
    `<meta name="postern-session" content="${escapeAttribute(session)}" data-next="${escapeAttribute(next)}">`,
    `<script src="${signInScriptPath}"></script>`,
    '</head><body><noscript>The Postern operator UI needs JavaScript.</noscript></body></html>',
    '',
  ].join('\n');
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
