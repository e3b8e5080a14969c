/** Every bound of the MCP channel, named with its unit last. Defaults here; tests may pass smaller ones. */
export interface McpLimits {
  /** Live children (and remote sessions) at once; the least recently used idle one is stopped first. */
  readonly childrenMax: number;
  /** One JSON-RPC message from an upstream (a stdio line, an HTTP reply body); beyond it the transport is closed. */
  readonly replyBytesMax: number;
  /**
   * What a streamable_http server sends outside a call (its GET stream of server-initiated messages, initialize,
   * tools/list), sustained, after a burst of 2 × `replyBytesMax`; one message of it is bounded by `replyBytesMax`. Over
   * either bound the session is closed (Status `reply_too_large`); the next call opens a new one.
   */
  readonly serverStreamBytesPerSecond: number;
  /** spawn + initialize, or connect + initialize, before the boundary. */
  readonly initializeTimeoutMs: number;
  /** Each of DNS, TCP and TLS of a streamable_http connection. */
  readonly connectTimeoutMs: number;
  readonly dnsAddressesMax: number;
  /** SIGTERM first; SIGKILL after this. */
  readonly killGraceMs: number;
  /** Restart backoff after an unexpected exit or a failed start: base × 2^(n-1), capped. */
  readonly backoffMsBase: number;
  readonly backoffMsMax: number;
  /** A stderr line kept in the log (longer ones are cut, after scrubbing). */
  readonly stderrLineBytesMax: number;
  /** stderr lines logged per second per child; the rest are counted and dropped. */
  readonly stderrLinesPerSecond: number;
  /** tools/list pages read, and tools kept, per server. */
  readonly toolsPagesMax: number;
  readonly toolsMax: number;
}

export const defaultMcpLimits: McpLimits = {
  childrenMax: 8,
  replyBytesMax: 4 * 1024 * 1024,
  // Notifications are small (progress, list_changed, log lines): a steady MiB a second is already a flood.
  serverStreamBytesPerSecond: 1024 * 1024,
  initializeTimeoutMs: 20_000,
  connectTimeoutMs: 10_000,
  dnsAddressesMax: 16,
  killGraceMs: 2_000,
  backoffMsBase: 500,
  backoffMsMax: 30_000,
  stderrLineBytesMax: 2 * 1024,
  stderrLinesPerSecond: 100,
  toolsPagesMax: 20,
  toolsMax: 1_000,
};
