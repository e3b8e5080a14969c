/**
 * Codes the operator host answers with before a request reaches a handler. They live beside the
 * host because only it produces them; handler errors use the contract's codes.
 */
export const hostErrorMeanings = {
  UNAUTHENTICATED: 'No valid session cookie, bearer token or one-run token; open the URL the daemon printed.',
  HOST_NOT_ALLOWED: 'The Host header is not 127.0.0.1:PORT or localhost:PORT (DNS-rebinding defence).',
  CROSS_SITE_REFUSED: 'A state-changing API call that is not JSON from this very origin (a page on another local port shares the cookie’s site).',
  NOT_FOUND: 'No asset or API method at this path.',
  METHOD_NOT_ALLOWED: 'This path does not accept the HTTP method used.',
  INVALID_ARGUMENT: 'The API request body is not JSON.',
  PAYLOAD_LIMIT: 'The API request body is larger than the host accepts.',
  INTERNAL: 'The host failed while answering; a bug, see the daemon log.',
  RENDERER_NOT_BUILT: 'The operator UI bundle is missing; run `npm run build:renderer`.',
} as const;

export type HostErrorCode = keyof typeof hostErrorMeanings;
