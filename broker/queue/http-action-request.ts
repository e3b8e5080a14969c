import { createHash } from 'node:crypto';
import { z } from 'zod';

/** What an agent asks for. It names a route and a path; never a host, a port or a credential. */
export const httpActionRequestSchema = z.strictObject({
  route: z.string().min(1).max(64),
  method: z.string().min(1).max(16),
  path: z.string().min(1).max(65_536),
  query: z.record(z.string().max(1024), z.union([z.string().max(65_536), z.array(z.string().max(65_536)).max(256)])).optional(),
  headers: z.record(z.string().max(256), z.string().max(65_536)).optional(),
  /** A string is sent as UTF-8; bytes as they are. */
  body: z.union([z.string(), z.instanceof(Uint8Array)]).optional(),
  idempotency_key: z.string().max(1024).optional(),
  timeout_ms: z.number().int().positive().optional(),
  /** Ask the broker to follow a redirect. It never does with credentials: a cross-origin one is REDIRECT_BLOCKED. */
  follow_redirects: z.boolean().optional(),
  /** Resend this earlier action's request as its next attempt (same route, fingerprint and key); see retryHttpAction. */
  retry_of: z.string().min(1).max(80).optional(),
});
export type HttpActionRequest = z.infer<typeof httpActionRequestSchema>;

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

export function normalizeHttpRequest(request: HttpActionRequest): NormalizedHttpRequest {
  const query: [string, string][] = [];
  for (const [name, value] of Object.entries(request.query ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) query.push([name, v]);
  }
  const headers = Object.entries(request.headers ?? {})
    .map(([name, value]): [string, string] => [name.toLowerCase(), value])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const body = request.body === undefined ? Buffer.alloc(0) : typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : Buffer.from(request.body);
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

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
