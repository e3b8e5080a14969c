/**
 * Codes the operator host answers with before a request reaches a handler. They live beside the
 * host because only it produces them; handler errors use the contract's codes.
 */
export const hostErrorMeanings = {
  UNAUTHENTICATED: 'No valid session secret (Authorization: Bearer) or sign-in token; open the URL the daemon printed.',
  SIGN_IN_USED: 'The printed sign-in URL was already exchanged for a session; it works once. Restart the daemon for a new one.',
  MALFORMED_PATH: 'The request target is not a path this host can parse.',
  HOST_NOT_ALLOWED: 'The Host header is not 127.0.0.1:PORT or localhost:PORT (DNS-rebinding defence).',
  CROSS_SITE_REFUSED: 'A state-changing call that is not JSON from this very origin (a page on another local port is the same site).',
  NOT_FOUND: 'No asset or API method at this path.',
  METHOD_NOT_ALLOWED: 'This path does not accept the HTTP method used.',
  INVALID_ARGUMENT: 'The API request body is not JSON.',
  PAYLOAD_LIMIT: 'The API request body is larger than the host accepts.',
  INTERNAL: 'The host failed while answering; a bug, see the daemon log.',
  EVENT_STREAMS_LIMIT: 'GET /api/events already has as many streams open as the host allows (each tab holds one).',
  RENDERER_NOT_BUILT: 'The operator UI bundle is missing; run `npm run build:renderer`.',
} as const;

export type HostErrorCode = keyof typeof hostErrorMeanings;
