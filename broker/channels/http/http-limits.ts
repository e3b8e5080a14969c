/**
 * Every bound of the HTTP channel, named with its unit last. Defaults here; the executor and tests
 * may pass smaller ones.
 */
export interface HttpLimits {
  /** Request body the agent may send. */
  readonly bodyBytesMax: number;
  readonly urlBytesMax: number;
  readonly headerBytesMax: number;
  readonly headersCountMax: number;
  readonly idempotencyKeyCharsMax: number;
  /** Response body kept in the result store; beyond it the result says truncated (never silently). */
  readonly resultBodyBytesMax: number;
  /**
   * Bytes kept past a cap (result or diagnostic) so the scrubber sees whole any secret that starts before the cut:
   * at least the longest encoded form of a secret part (a JSON \uXXXX escape is 6 bytes a byte).
   */
  readonly scrubLookaheadBytes: number;
  /** The most a request may ask to keep past a cap for its scrubber (a bound on memory per response). */
  readonly scrubLookaheadBytesMax: number;
  /** A compressed body (a remote that ignored `Accept-Encoding: identity`) decodes to at most this; beyond it it is withheld. */
  readonly decodedBodyBytesMax: number;
  /** Response bytes read at all; beyond it the read is aborted and the response is incomplete. */
  readonly responseBytesMax: number;
  /** Partial body of an incomplete response kept as a marked diagnostic. */
  readonly diagnosticBytesMax: number;
  /** Each setup stage (DNS, TCP, TLS) separately. */
  readonly connectTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** Connection setup attempts per action while no attempt crossed dispatch. */
  readonly setupAttemptsMax: number;
  /** Backoff between setup attempts: base × 2^(n-1), capped. */
  readonly setupBackoffMsBase: number;
  readonly setupBackoffMsMax: number;
  readonly retryAfterMsMax: number;
  /**
   * Idle pooled connections kept per route, and how long one stays idle before the pool closes it (shorter when the
   * server's `Keep-Alive: timeout=N` hint says so, as undici reads it: N s minus keepAliveHintMarginMs).
   */
  readonly idleConnectionsMax: number;
  readonly keepAliveMs: number;
  readonly keepAliveHintMarginMs: number;
  /**
   * How much longer than the pool undici itself keeps an idle socket. The pool owns idle expiry: a connection it hands
   * out waits for its DISPATCH_STARTED to be durable before the request is written, and undici's own idle timer must
   * not close it in that wait (that close reads as a reused connection broken after dispatch: unknown).
   */
  readonly keepAliveHandoffGraceMs: number;
  /** Addresses from one DNS answer that are checked (all of them must pass). */
  readonly dnsAddressesMax: number;
}

export const defaultHttpLimits: HttpLimits = {
  bodyBytesMax: 1024 * 1024,
  urlBytesMax: 8 * 1024,
  headerBytesMax: 16 * 1024,
  headersCountMax: 64,
  idempotencyKeyCharsMax: 255,
  resultBodyBytesMax: 1024 * 1024,
  scrubLookaheadBytes: 64 * 1024,
  scrubLookaheadBytesMax: 4 * 1024 * 1024,
  decodedBodyBytesMax: 8 * 1024 * 1024,
  responseBytesMax: 64 * 1024 * 1024,
  diagnosticBytesMax: 4 * 1024,
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 60_000,
  bodyTimeoutMs: 60_000,
  setupAttemptsMax: 3,
  setupBackoffMsBase: 50,
  setupBackoffMsMax: 1_000,
  retryAfterMsMax: 3_600_000,
  idleConnectionsMax: 4,
  keepAliveMs: 4_000,
  keepAliveHintMarginMs: 2_000,
  keepAliveHandoffGraceMs: 60_000,
  dnsAddressesMax: 16,
};
