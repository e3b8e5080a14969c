import type { ClosedSet } from './closed-set.js';

/**
 * How often a person approves calls on a route, a route rule or an SSH host: never, once per agent
 * session, or every call. The one definition: config, events, records, the operator API and the
 * renderer all derive their type from it.
 */
export const ApprovalMode = {
  none: 'none',
  session: 'session',
  per_call: 'per_call',
} as const satisfies ClosedSet<string>;
export type ApprovalMode = keyof typeof ApprovalMode;

/**
 * Where an HTTP route puts the secret: an Authorization bearer token, a named header, HTTP basic
 * auth, a query parameter, or an AWS Signature V4 over the final request (the secret key signs, never travels). The credential's kind must be the same (SSH keys are not injected
 * into HTTP, so `ssh_key` is a credential kind but not an injection kind).
 */
export const InjectionKind = {
  bearer: 'bearer',
  header: 'header',
  basic: 'basic',
  query: 'query',
  aws_sigv4: 'aws_sigv4',
  /** A bearer access token the broker obtains from the route's token endpoint with an `oauth2_client` credential. */
  oauth2_client_credentials: 'oauth2_client_credentials',
} as const satisfies ClosedSet<string>;
export type InjectionKind = keyof typeof InjectionKind;
