import { hash } from 'node:crypto';
import type { z } from 'zod';
import { agentToolInputSchemas, type AgentToolInput } from '../contract/index.js';

/**
 * What an agent may send is defined once, by the http_request tool's schema in broker/contract (strict: an
 * undocumented field is refused, named). `timeout_ms` there is the caller's wait, which the executor never reads.
 */
export const httpActionRequestSchema = agentToolInputSchemas.http_request;
export type HttpActionRequest = AgentToolInput<'http_request'>;

/**
 * What in-process callers (a reconciliation lookup or read-back, a person's retry of a kept request) hand the
 * executor: typed, never parsed from an agent, and never wider than the agent's request except that a kept
 * request's body comes back as the bytes it was.
 */
export interface InternalHttpRequest {
  readonly route: string;
  readonly method: string;
  readonly path: string;
  readonly query?: Readonly<Record<string, string | readonly string[]>>;
  readonly headers?: Readonly<Record<string, string>>;
  /** A string is sent as UTF-8; bytes as they are. */
  readonly body?: string | Uint8Array;
  readonly idempotency_key?: string;
}

/** The agent's request as the executor uses it: the caller's wait and the retry reference are not part of it. */
export function internalRequestOf(request: HttpActionRequest): InternalHttpRequest {
  const { timeout_ms: _wait, retry_of: _retryOf, ...rest } = request;
  return rest;
}

/**
 * The field a schema issue names: the path, or for an undocumented key the key itself (zod reports those at the
 * object's path with the key in `keys`).
 */
export function issueField(issue: z.core.$ZodIssue | undefined): string {
  if (issue === undefined) return '';
  const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
  return [...issue.path.map(String), ...keys.slice(0, 1)].join('.');
}

/**
 * The error map every agent-facing parse passes (`safeParse(input, agentParse)`): a required field that is absent
 * says so, instead of zod's "expected string, received undefined" — an answer's text never shows the word
 * undefined for a part that is not there. A schema's own message still wins (zod's precedence).
 */
export const agentParse: z.core.ParseContext<z.core.$ZodIssue> = {
  error: (issue) =>
    issue.code === 'invalid_type' && issue.input === undefined
      ? `a required field is missing (expected ${issue.expected})`
      : undefined,
};

/** The message for an issue: an undocumented field says the tool schema is the whole of what may be sent. */
export function issueMessage(issue: z.core.$ZodIssue | undefined): string {
  if (issue === undefined) return 'malformed arguments';
  if (issue.code === 'unrecognized_keys')
    return `${issueField(issue)} is not a field of this tool (its input schema lists every field)`;
  return issue.message;
}

/** The request parts in one normalized form: what the fingerprint covers and what goes on the wire. */
export interface NormalizedHttpRequest {
  readonly route: string;
  readonly method: string;
  readonly path: string;
  readonly query: ReadonlyArray<readonly [string, string]>;
  /** Lower-case names, sorted: header order between distinct names carries no meaning. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Buffer;
}

export function normalizeHttpRequest(request: InternalHttpRequest): NormalizedHttpRequest {
  const query: [string, string][] = [];
  for (const [name, value] of Object.entries(request.query ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) query.push([name, v]);
  }
  const headers = Object.entries(request.headers ?? {})
    .map(([name, value]): [string, string] => [name.toLowerCase(), value])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const body =
    request.body === undefined
      ? Buffer.alloc(0)
      : typeof request.body === 'string'
        ? Buffer.from(request.body, 'utf8')
        : Buffer.from(request.body);
  return { route: request.route, method: request.method.toUpperCase(), path: request.path, query, headers, body };
}

export type RequestPart = 'method' | 'path' | 'query' | 'headers' | 'body';
const allParts: readonly RequestPart[] = ['method', 'path', 'query', 'headers', 'body'];

/**
 * sha256 over the named request parts (all of them for the request fingerprint; the contract's list
 * for an idempotency fingerprint). Built from the agent's request only — the injected credential is
 * added later and is never part of it. Canonical JSON with fixed key order; the body enters as its
 * own digest so a large body is hashed once.
 */
export function requestFingerprint(request: NormalizedHttpRequest, parts: readonly RequestPart[] = allParts): string {
  const canonical: Record<string, unknown> = { channel: 'http', route: request.route };
  for (const part of allParts) {
    if (!parts.includes(part)) continue;
    canonical[part] = part === 'body' ? sha256Hex(request.body) : request[part];
  }
  return `sha256:${sha256Hex(Buffer.from(JSON.stringify(canonical)))}`;
}

/** A fingerprint for input that did not even parse: bound to its bytes, never to a secret. */
export function unparsedFingerprint(input: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(input) ?? 'undefined';
  } catch {
    text = 'unserializable';
  }
  return `sha256:${sha256Hex(Buffer.from(text))}`;
}

/** One-shot crypto.hash: ~2 µs a call here, against ~5 µs for createHash().update().digest(). */
export function sha256Hex(bytes: Uint8Array): string {
  return hash('sha256', bytes, 'hex');
}
