/**
 * A session secret handed to a page in its document: `<meta name="postern-session" content="…">`. The page's script
 * takes it into memory and removes the element (renderer/src/api/page-session.ts). The headless host signs tabs in by
 * POST /auth/session instead (the printed token and the typed code); the e2e fixture hands a known session to a page it
 * reloads this way (e2e/fixtures/browser.ts). No browser storage holds a secret: Chromium writes sessionStorage and
 * localStorage into the profile on disk, where a same-user agent reads them (THREAT-MODEL.md).
 */
export const operatorSignInMeta = 'postern-session';

/** Where builds before this one kept the secret (sessionStorage); a page that finds it there deletes it. */
export const legacyOperatorSessionKey = 'postern.operatorSession';
