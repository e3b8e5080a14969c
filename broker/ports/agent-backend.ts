import type { AgentPeer, AgentRouteList, AgentToolName, AgentToolReply } from '../contract/index.js';

/** Why a waiting call's signal fired: MCP notifications/cancelled, or the connection went away. */
export type CallerStop = 'cancelled' | 'disconnected';

/** One tool answer: structuredContent plus whether MCP should flag it isError, and a short text. */
export interface ToolAnswer {
  readonly isError: boolean;
  readonly structured: AgentToolReply | AgentRouteList;
  readonly text: string;
}

/**
 * What the agent socket (broker/agent) asks of the broker. Implemented in broker/queue, where the
 * approval queue, the executors and the journal meet; the socket layer only frames, limits and
 * identifies. No method can approve anything: that surface does not exist here.
 */
export interface AgentBackend {
  /**
   * Opens the session of this process (pid + start time), or finds the one already recorded for
   * it. Refuses (CodedError) a revoked or ended session. clientInfo is only a label.
   */
  openSession(peer: AgentPeer, client: { name?: string; version?: string }): Promise<{ session_id: string }>;
  /** The last connection of a session closed (the process may still live). */
  sessionDisconnected(sessionId: string): void;
  /**
   * Runs one tool call. `args` is as received (unvalidated). `signal` fires when the caller stops
   * waiting; its reason is a CallerStop. Never rejects for a refusal: refusals are answers.
   */
  call(sessionId: string, tool: AgentToolName, args: unknown, signal: AbortSignal): Promise<ToolAnswer>;
}
