/**
 * How the headless host hands one browser tab its operator session. The printed sign-in URL is answered with the
 * operator UI's own page carrying the fresh session secret in `<meta name="postern-session">`
 * (broker/host/sign-in-page.ts); the page's script takes it into memory and removes the element
 * (renderer/src/api/page-session.ts). No browser storage holds it: Chromium writes sessionStorage and localStorage
 * into the profile on disk, where a same-user agent reads them (THREAT-MODEL.md).
 */
export const operatorSignInMeta = 'postern-session';

/** Where builds before this one kept the secret (sessionStorage); a page that finds it there deletes it. */
export const legacyOperatorSessionKey = 'postern.operatorSession';
