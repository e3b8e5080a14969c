import type {
  AgentPeer,
  AgentRouteList,
  AgentToolName,
  AgentToolReply,
  CredentialRequestReply,
} from '../contract/index.js';

/** Why a waiting call's signal fired: MCP notifications/cancelled, or the connection went away. */
export type CallerStop = 'cancelled' | 'disconnected';
/**
 * A call's signal reason when the broker itself is stopping (the agent socket closes every connection): not the
 * caller's doing, so nothing is recorded on its action — the next start's recovery closes it as it would after a crash.
 */
export const brokerStopping = 'broker_stopping';
export type CallStop = CallerStop | typeof brokerStopping;

/**
 * A state change of a waiting call, for MCP progress notifications (sent only when the client asked with a
 * progressToken): monotonic `progress`, and a short line for people ("card shown", "approved, waiting for #42",
 * "dispatched"). Never carries anything of the request's or the response's content.
 */
export interface CallProgress {
  readonly progress: number;
  readonly message: string;
}

/** The committed result an answer carries: what the socket reports back once it tried to hand it over. */
export interface ResultHandoff {
  readonly action_id: string;
  readonly result_id: string;
}

/** One tool answer: structuredContent plus whether MCP should flag it isError, and a short text. */
export interface ToolAnswer {
  readonly isError: boolean;
  readonly structured: AgentToolReply | AgentRouteList | CredentialRequestReply;
  readonly text: string;
  /**
   * Present when the answer carries an action's committed result. The socket reports the handoff's
   * end through resultDelivered / resultNotDelivered; the answer on the wire is the same either way.
   */
  readonly handoff?: ResultHandoff;
}

/** Every configured route and SSH host entry name, in config order: list_routes' names over all its pages. */
export interface TargetNames {
  readonly routes: readonly string[];
  readonly ssh_hosts: readonly string[];
}

/** One upstream MCP tool as agents see it: `<server>.<tool>`, with the input schema its server gave. */
export interface UpstreamToolListing {
  readonly name: string;
  readonly description?: string;
  readonly inputSchema: { readonly type: 'object'; readonly [key: string]: unknown };
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
   * waiting; its reason is a CallStop (a CallerStop, or brokerStopping when the broker closes the connection). Never rejects for a refusal: refusals are answers.
   * `onRecorded`, for a call that admits an action (http_request, ssh_exec), is told the action's id once its
   * admission is durable — by a sync other appends asked for, none of its own; at the latest as the action's
   * dispatch sync releases it, in the turn that writes its first byte — so a caller that loses the answer (a broker restart)
   * can still name the action. It may never be told (a refusal before admission, an answer first).
   */
  call(
    sessionId: string,
    tool: AgentToolName,
    args: unknown,
    signal: AbortSignal,
    onProgress?: (p: CallProgress) => void,
    onRecorded?: (actionId: string) => void,
  ): Promise<ToolAnswer>;
  /**
   * The answer carrying `handoff` was written completely to the caller's connection (the socket
   * write's callback succeeded): MCP has no acknowledgement of a response, so this is the strongest
   * evidence of a complete handoff the broker can have. It does not prove the agent read it.
   */
  resultDelivered?(sessionId: string, handoff: ResultHandoff): Promise<void>;
  /**
   * The answer carrying `handoff` was never completely written: the connection went away (or was
   * dropped for not reading) before its write finished. Not called when the caller cancelled the
   * call (MCP then expects no answer), nor when the socket cannot tell (a write in flight when the
   * connection went): then neither method is called.
   */
  resultNotDelivered?(sessionId: string, handoff: ResultHandoff): Promise<void>;
  /**
   * The names list_routes gives any session, all of them and straight from the config (never a host, URL or
   * credential), for an INVALID_TARGET refusal to name; undefined when list_routes would be refused. Absent: none.
   */
  targetNames?(): TargetNames | undefined;
  /** The upstream MCP servers' tools (`<server>.<tool>`); a server is started when first needed. Absent: none. */
  upstreamTools?(): Promise<readonly UpstreamToolListing[]>;
  /** Told whenever the upstream tool list may have changed (a server's list_changed, an unlock, a config change). */
  onUpstreamToolsChanged?(listener: () => void): () => void;
  /** Runs one upstream tool call (`name` is `<server>.<tool>`, `args` as received); refusals and onRecorded as for call. */
  callUpstream?(
    sessionId: string,
    name: string,
    args: unknown,
    signal: AbortSignal,
    onProgress?: (p: CallProgress) => void,
    onRecorded?: (actionId: string) => void,
  ): Promise<ToolAnswer>;
}
