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
 * auth or a query parameter. The credential's kind must be the same (SSH keys are not injected
 * into HTTP, so `ssh_key` is a credential kind but not an injection kind).
 */
export const InjectionKind = {
  bearer: 'bearer',
  header: 'header',
  basic: 'basic',
  query: 'query',
} as const satisfies ClosedSet<string>;
export type InjectionKind = keyof typeof InjectionKind;
