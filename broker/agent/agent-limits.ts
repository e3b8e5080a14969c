/**
 * The bounds of the agent socket (STYLE habit 3). Every one is overridable per socket (tests use
 * small values); the defaults are what a real broker runs with.
 */
export interface AgentLimits {
  /**
   * Open connections per uid (every agent runs as the user, so in effect all of them). At the cap a new one evicts
   * an idle connection (make-room.ts); only when every one has a call in progress is it refused with RATE_LIMITED.
   */
  readonly connectionsPerUidMax: number;
  /** How long an evicted connection may take to read its CONNECTION_EVICTED line before it is destroyed. */
  readonly evictedDrainMs: number;
  /** One JSON-RPC message line, in bytes; a longer one is answered PAYLOAD_LIMIT and skipped up to its newline. */
  readonly frameBytesMax: number;
  /** Bytes of one oversized line the socket will read and drop while looking for its end; beyond this the connection closes. */
  readonly oversizedFrameSkipBytesMax: number;
  /** Oversized lines one connection may send; the last one is answered and the connection closes. */
  readonly oversizedFramesMax: number;
  /** Nesting depth of one message's JSON; deeper is refused (and never reaches a parser's stack). */
  readonly frameDepthMax: number;
  /** Tool calls waiting at once per session; the next gets an isError RATE_LIMITED answer. */
  readonly inFlightCallsPerSessionMax: number;
  /** A connection that has not sent `initialize` by then is closed. */
  readonly handshakeMs: number;
  /** Consecutive unparseable or invalid frames after which the connection is closed. */
  readonly garbageFramesMax: number;
  /** Bytes queued for a client that does not read; beyond this the connection is dropped. */
  readonly outboundBytesMax: number;
}

export const agentLimitsDefault: AgentLimits = {
  connectionsPerUidMax: 32,
  evictedDrainMs: 1_000,
  frameBytesMax: 8 * 1024 * 1024,
  oversizedFrameSkipBytesMax: 64 * 1024 * 1024,
  oversizedFramesMax: 8,
  frameDepthMax: 64,
  inFlightCallsPerSessionMax: 16,
  handshakeMs: 10_000,
  garbageFramesMax: 100,
  outboundBytesMax: 64 * 1024 * 1024,
};

export function resolveAgentLimits(overrides: Partial<AgentLimits> | undefined): AgentLimits {
  const limits = { ...agentLimitsDefault, ...overrides };
  for (const [name, value] of Object.entries(limits)) {
    // A programmer error (STYLE habit 4): limits come from code, never from an agent.
    if (!Number.isSafeInteger(value) || value <= 0)
      throw new Error(`agent limit ${name} must be a positive integer (got ${String(value)})`);
  }
  return limits;
}
