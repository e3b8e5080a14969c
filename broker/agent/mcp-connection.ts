import type { Socket } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode as McpErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type JSONRPCMessage,
  type ProgressToken,
  type RequestId,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Logger } from 'pino';
import type { z } from 'zod';
import {
  actionRecordedCapability,
  actionRecordedNotification,
  agentRefusalSchema,
  agentToolReplySchema,
  isCodedError,
  type AgentPeer,
  type AgentRouteList,
  type AgentToolReply,
  type CredentialRequestReply,
} from '../contract/index.js';
import {
  brokerStopping,
  type AgentBackend,
  type CallStop,
  type CallProgress,
  type ResultHandoff,
  type ToolAnswer,
} from '../ports/index.js';
import type { AgentLimits } from './agent-limits.js';
import { refusalAnswer, refusalOutcome } from './agent-refusal.js';
import {
  agentToolReplySchemas,
  isAgentToolName,
  isUpstreamToolName,
  listedTools,
  upstreamListedTool,
} from './agent-tools.js';
import { answerText, withTargetNames } from './answer-text.js';
import { jsonRpcCode, jsonRpcError, jsonRpcErrorLine } from './jsonrpc-error.js';
import { LineTransport } from './line-transport.js';
import { OpenRequests } from './open-requests.js';
import { isOperatorMethod, isOperatorName } from './operator-names.js';
import type { SessionRegistry } from './session-registry.js';

export const serverName = 'postern';
/** clientInfo name/version are labels the client chose; kept short. */
const clientLabelCharsMax = 200;
/** A progress line is a short state change ("card shown", "approved, waiting for #42"). */
const progressMessageCharsMax = 200;

export interface McpConnectionOptions {
  readonly socket: Socket;
  readonly peer: AgentPeer;
  readonly backend: AgentBackend;
  readonly limits: AgentLimits;
  readonly sessions: SessionRegistry;
  readonly serverVersion: string;
  readonly logger?: Logger | undefined;
  /** Told each time the client sends a valid message (the cap's "least recently active"). */
  readonly onActive?: (() => void) | undefined;
  /** True once the broker is stopping: the connection's close is then the broker's, not the caller's. */
  readonly brokerStopping?: (() => boolean) | undefined;
  /** True once the broker drains before stopping: new calls are answered SHUTTING_DOWN, running ones go on. */
  readonly draining?: (() => boolean) | undefined;
}

/** What the socket's connection cap may ask of a served connection. */
export interface McpConnectionHandle {
  /** A request is unanswered, a call is running, or an answer carrying a result is still being written. */
  busy(): boolean;
  /**
   * Closes the connection with one id-null error line (`data.code` CONNECTION_EVICTED, `message` saying why),
   * unless it is busy: then nothing happens and false is returned. Nothing the client sends after it is handled.
   */
  evict(message: string): boolean;
}

/**
 * One MCP server for one accepted, identified connection. The session is opened when the client
 * sends `initialize` (kernel identity + the client's self-chosen label) and shared by every call on
 * the connection; each call gets its own AbortController whose reason we set ourselves —
 * 'cancelled' for MCP notifications/cancelled, 'disconnected' when the socket goes (brokerStopping when the broker
 * closed it, stopping) — because the
 * SDK aborts with whatever reason the client wrote in its cancel notification (or none on close).
 */
// eslint-disable-next-line max-lines-per-function -- six tool handlers on one MCP server per connection, closing over its session
export function serveMcpConnection(options: McpConnectionOptions): McpConnectionHandle {
  const { socket, peer, backend, limits, sessions, logger } = options;
  const calls = new Set<AbortController>();
  const requests = new OpenRequests();
  /** Evicted: no call may start on it any more (its close follows once the notice line drains). */
  let evicted = false;
  /** Answers carrying a committed result, by request id, until their line is written or the connection goes. */
  const handoffs = new Map<RequestId, Handoff>();
  let session: Promise<string> | undefined;
  let attachedSessionId: string | undefined;
  let closed = false;
  /** Why a running call's caller is gone with the connection: the broker closing it is not the caller's doing. */
  const connectionGone = (): CallStop => (options.brokerStopping?.() === true ? brokerStopping : 'disconnected');

  const handshakeTimer = setTimeout(() => socket.destroy(), limits.handshakeMs);
  handshakeTimer.unref();

  const openSession = (message: JSONRPCMessage): void => {
    if (session !== undefined) return;
    const init = InitializeRequestSchema.safeParse(message);
    if (!init.success) return;
    clearTimeout(handshakeTimer);
    const { name, version } = init.data.params.clientInfo;
    const client = { name: name.slice(0, clientLabelCharsMax), version: version.slice(0, clientLabelCharsMax) };
    session = Promise.resolve()
      .then(() => backend.openSession(peer, client))
      .then(({ session_id: sessionId }) => {
        if (typeof sessionId !== 'string' || sessionId.length === 0)
          throw new Error('the backend opened a session without an id');
        sessions.attach(sessionId);
        attachedSessionId = sessionId;
        if (closed) release();
        return sessionId;
      });
    // Every call awaits `session` and answers its failure; this only keeps an unused rejection quiet.
    session.catch((error: unknown) =>
      logger?.info({ pid: peer.pid, code: isCodedError(error) ? error.code : 'INTERNAL' }, 'agent session refused'),
    );
  };

  const release = (): void => {
    if (attachedSessionId === undefined) return;
    const sessionId = attachedSessionId;
    attachedSessionId = undefined;
    try {
      sessions.detach(sessionId);
    } catch (error) {
      logger?.error({ err: error, session_id: sessionId }, 'sessionDisconnected failed');
    }
  };

  const transport = new LineTransport(socket, limits, {
    observe: (message) => {
      requests.received(message);
      options.onActive?.();
      if ('method' in message && message.method === 'initialize' && 'id' in message) openSession(message);
    },
    closing: () => {
      closed = true;
      stopWatchingUpstreams?.();
      clearTimeout(handshakeTimer);
      for (const controller of calls) controller.abort(connectionGone());
      calls.clear();
      // Answers the server had not written yet never will be: the caller is gone.
      for (const entry of handoffs.values()) reportHandoff(entry, false);
      handoffs.clear();
      release();
    },
    sending: (message) => {
      // An answer is activity too: a call that waited minutes has just been used, not left idle.
      if (requests.sent(message)) options.onActive?.();
      if (!('id' in message) || message.id === undefined || !('result' in message || 'error' in message))
        return undefined;
      const entry = handoffs.get(message.id);
      if (entry === undefined) return undefined;
      handoffs.delete(message.id);
      return (written) => {
        // A write Node cannot vouch for either way is not reported: neither delivered nor failed.
        if (written === undefined)
          logger?.debug(
            { action_id: entry.handoff.action_id },
            'result handoff ended with the connection; not known whether it was written',
          );
        else reportHandoff(entry, written && 'result' in message);
      };
    },
  });

  /** Tells the backend how a result's handoff ended; its failure is logged, never the connection's. */
  const reportHandoff = (entry: Handoff, written: boolean): void => {
    Promise.resolve()
      .then(() =>
        written
          ? backend.resultDelivered?.(entry.sessionId, entry.handoff)
          : backend.resultNotDelivered?.(entry.sessionId, entry.handoff),
      )
      .catch((error: unknown) =>
        logger?.error({ err: error, action_id: entry.handoff.action_id, written }, 'recording a result handoff failed'),
      );
  };

  /**
   * Watches for the write of an answer that carries a committed result. A call the caller cancelled
   * gets no answer (MCP), so nothing is reported for it; a connection already gone is a failed handoff.
   */
  const expectHandoff = (requestId: RequestId, entry: Handoff, sdkSignal: AbortSignal): void => {
    if (sdkSignal.aborted) {
      if (closed) reportHandoff(entry, false);
      return;
    }
    handoffs.set(requestId, entry);
    sdkSignal.addEventListener(
      'abort',
      () => {
        if (!closed && handoffs.get(requestId) === entry) handoffs.delete(requestId);
      },
      { once: true },
    );
  };

  const server = new Server(
    { name: serverName, version: options.serverVersion },
    { capabilities: { tools: { listChanged: backend.onUpstreamToolsChanged !== undefined } } },
  );
  server.onerror = (error) => logger?.debug({ err: error, pid: peer.pid }, 'agent connection protocol error');
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [...listedTools.map((tool) => ({ ...tool })), ...(await upstreamListing(backend, logger))],
  }));
  // An upstream server's list_changed (or an unlock that lets its children start) reaches every agent connection.
  const stopWatchingUpstreams = backend.onUpstreamToolsChanged?.(() => {
    if (closed || session === undefined) return;
    server.sendToolListChanged().catch((error: unknown) => logger?.debug({ err: error }, 'list_changed not sent'));
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    if (session === undefined) throw jsonRpcError(McpErrorCode.InvalidRequest, 'send initialize before tools/call');
    const progress = progressSender(request.params._meta?.progressToken, extra.sendNotification, (error) =>
      logger?.debug({ err: error }, 'a progress notification was not sent'),
    );
    const recorded =
      server.getClientCapabilities()?.experimental?.[actionRecordedCapability] === undefined
        ? undefined
        : recordedSender(extra.requestId, extra.sendNotification, (error) =>
            logger?.debug({ err: error }, 'an action_recorded notification was not sent'),
          );
    try {
      const { name } = request.params;
      const answer = await answerCall(name, request.params.arguments ?? {}, extra.signal, extra.requestId, {
        onProgress: progress?.send,
        onRecorded: recorded?.send,
      });
      return toResult(answer, replySchemaOf(name), logger);
    } finally {
      // Nothing about this call is sent after its answer: a late progress would name a request the client forgot.
      progress?.stop();
      recorded?.stop();
    }
  });
  server.fallbackRequestHandler = async (request) => {
    if (isOperatorName(request.method)) {
      throw jsonRpcError(
        jsonRpcCode.methodNotFound,
        `${request.method} is an operator capability; agents can never call it`,
        'OPERATOR_ONLY',
      );
    }
    throw jsonRpcError(jsonRpcCode.methodNotFound, 'Method not found');
  };

  const answerCall = async (
    name: string,
    args: unknown,
    sdkSignal: AbortSignal,
    requestId: RequestId,
    watch: CallWatchers,
  ): Promise<ToolAnswer> => {
    // Refused before the backend saw it: an action call admitted nothing (not_attempted); a read claims no outcome.
    const outcome = refusalOutcome(name);
    const run = toolRunner(backend, name, args);
    if (run === undefined) {
      return isOperatorName(name)
        ? refusalAnswer(
            'OPERATOR_ONLY',
            `${name} is an operator capability; agents can never call it`,
            'never',
            outcome,
            'name',
          )
        : refusalAnswer(
            'UNKNOWN_TOOL',
            'not a Postern tool; list the tools first',
            'after_correction',
            outcome,
            'name',
          );
    }
    let sessionId: string;
    try {
      sessionId = await (session as Promise<string>);
    } catch (error) {
      return isCodedError(error)
        ? refusalAnswer(error.code, error.message, 'never', outcome)
        : refusalAnswer('INTERNAL', 'the session could not be opened', 'never', outcome);
    }
    if (closed || evicted || sdkSignal.aborted)
      return refusalAnswer('CALLER_CANCELLED', 'the caller went away before the call started', 'never', outcome);
    if (options.draining?.() === true)
      return refusalAnswer(
        'SHUTTING_DOWN',
        'the broker is stopping; nothing new is accepted and nothing was recorded (call again once it runs)',
        'backoff',
        outcome,
      );
    if (!sessions.tryBeginCall(sessionId)) {
      return refusalAnswer(
        'RATE_LIMITED',
        `at most ${limits.inFlightCallsPerSessionMax} calls may wait at once per session`,
        'backoff',
        outcome,
      );
    }
    const controller = new AbortController();
    calls.add(controller);
    const onSdkAbort = (): void => controller.abort(closed ? connectionGone() : ('cancelled' satisfies CallStop));
    sdkSignal.addEventListener('abort', onSdkAbort, { once: true });
    try {
      const answer = checkedAnswer(await run(sessionId, controller.signal, watch));
      if (answer.handoff !== undefined) expectHandoff(requestId, { sessionId, handoff: answer.handoff }, sdkSignal);
      return withTargetNames(answer, () => backend.targetNames?.());
    } catch (error) {
      logger?.error({ err: error, session_id: sessionId, tool: name }, 'agent backend call threw');
      // The backend had the call: it may have admitted (even dispatched) its action, so no outcome is claimed.
      return refusalAnswer(
        'INTERNAL',
        'the broker failed to answer this call; its record says how far it got',
        'never',
        null,
      );
    } finally {
      sdkSignal.removeEventListener('abort', onSdkAbort);
      calls.delete(controller);
      sessions.endCall(sessionId);
    }
  };

  server.connect(refusingMalformedToolCalls(transport)).catch((error: unknown) => {
    logger?.error({ err: error }, 'agent connection failed to start');
    socket.destroy();
  });

  const busy = (): boolean => requests.size > 0 || calls.size > 0 || handoffs.size > 0;
  return {
    busy,
    evict: (message) => {
      if (closed || evicted) return true;
      if (busy()) return false;
      evicted = true;
      clearTimeout(handshakeTimer);
      transport.endWith(
        jsonRpcErrorLine(null, jsonRpcCode.refused, message, 'CONNECTION_EVICTED'),
        limits.evictedDrainMs,
      );
      return true;
    },
  };
}

/** What the backend tells about a call while it runs (each only when the client can be told). */
interface CallWatchers {
  readonly onProgress: ((p: CallProgress) => void) | undefined;
  readonly onRecorded: ((actionId: string) => void) | undefined;
}

type ToolRunner = (sessionId: string, signal: AbortSignal, watch: CallWatchers) => Promise<ToolAnswer>;

/** Postern's own tool, or an upstream server's (`<server>.<tool>`) when upstreams exist; undefined: no such tool. */
function toolRunner(backend: AgentBackend, name: string, args: unknown): ToolRunner | undefined {
  if (isAgentToolName(name))
    return (sessionId, signal, watch) =>
      backend.call(sessionId, name, args, signal, watch.onProgress, watch.onRecorded);
  // An operator method (`approvals.approve`) has the shape of an upstream name: it is refused as such, never routed.
  // Only the exact names: an upstream tool may well be called `lock_file` (configuration refuses operator namespaces).
  if (isOperatorMethod(name)) return undefined;
  const callUpstream = backend.callUpstream?.bind(backend);
  if (callUpstream === undefined || !isUpstreamToolName(name)) return undefined;
  return (sessionId, signal, watch) => callUpstream(sessionId, name, args, signal, watch.onProgress, watch.onRecorded);
}

/** The reply schema an answer to `name` is checked against: an upstream tool answers with an action's envelope. */
function replySchemaOf(name: string): z.ZodType {
  if (isAgentToolName(name)) return agentToolReplySchemas[name];
  return isUpstreamToolName(name) ? agentToolReplySchema : agentRefusalSchema;
}

/** The upstream tools for tools/list; a backend that cannot list them now lists Postern's own tools only. */
async function upstreamListing(
  backend: AgentBackend,
  logger: Logger | undefined,
): Promise<ReturnType<typeof upstreamListedTool>[]> {
  if (backend.upstreamTools === undefined) return [];
  try {
    return (await backend.upstreamTools()).map(upstreamListedTool);
  } catch (error) {
    logger?.warn({ code: isCodedError(error) ? error.code : 'INTERNAL' }, 'upstream tools could not be listed');
    return [];
  }
}

/**
 * The transport as the SDK sees it, minus malformed `tools/call` requests (params not an object,
 * `name` not a string, `arguments` not an object), which are answered here with JSON-RPC -32602
 * naming the field (docs/agent.md). The SDK would answer them -32603 with its schema parser's whole
 * message; nothing of a malformed call reaches a handler or the backend.
 */
function refusingMalformedToolCalls(transport: LineTransport): Transport {
  const guarded: Transport = {
    start: () => transport.start(),
    send: (message) => transport.send(message),
    close: () => transport.close(),
  };
  transport.onclose = () => guarded.onclose?.();
  transport.onerror = (error) => guarded.onerror?.(error);
  transport.onmessage = (message) => {
    const field = malformedToolCallField(message);
    if (field === undefined) {
      guarded.onmessage?.(message);
      return;
    }
    const id = (message as { id: RequestId }).id;
    const error = {
      code: McpErrorCode.InvalidParams,
      message: `invalid tools/call params: ${field}`,
      data: { code: 'INVALID_ARGUMENT', field },
    };
    void transport.send({ jsonrpc: '2.0', id, error });
  };
  return guarded;
}

/** The first offending field of a tools/call request's params (e.g. `params.arguments`), or undefined when it is well formed. */
function malformedToolCallField(message: JSONRPCMessage): string | undefined {
  if (!('method' in message) || message.method !== 'tools/call' || !('id' in message)) return undefined;
  const parsed = CallToolRequestSchema.safeParse(message);
  if (parsed.success) return undefined;
  // Only the path: a parser's message can quote the input (and the schema it expected).
  const path = parsed.error.issues[0]?.path ?? [];
  return path.length === 0 ? 'params' : path.map(String).join('.');
}

interface Handoff {
  readonly sessionId: string;
  readonly handoff: ResultHandoff;
}

/** A backend answer that is not an object would make the SDK throw a protocol error; it is a bug. */
function checkedAnswer(answer: ToolAnswer): ToolAnswer {
  if (
    typeof answer !== 'object' ||
    answer === null ||
    typeof answer.structured !== 'object' ||
    answer.structured === null
  ) {
    return refusalAnswer('INTERNAL', 'the broker produced a malformed answer', 'never', null);
  }
  return answer;
}

/**
 * The MCP result: structuredContent checked against the tool's reply schema (the one its outputSchema is
 * derived from, so a client that validates never rejects our answer; an answer that fails is a bug, answered
 * INTERNAL), and a text block built from exactly that structured content (answer-text.ts).
 */
function toResult(answer: ToolAnswer, schema: z.ZodType, logger: Logger | undefined): CallToolResult {
  const parsed = schema.safeParse(answer.structured);
  if (!parsed.success) {
    logger?.error(
      {
        issues: parsed.error.issues
          .slice(0, 5)
          .map((issue) => ({ path: issue.path.map(String).join('.'), code: issue.code })),
      },
      'a tool answer failed its reply schema',
    );
    const refusal = refusalAnswer(
      'INTERNAL',
      'the broker produced an answer outside its own schema; its record says how far the action got',
      'never',
      null,
    );
    return toResult(refusal, agentRefusalSchema, logger);
  }
  const structured = parsed.data as AgentToolReply | AgentRouteList | CredentialRequestReply;
  return {
    content: [{ type: 'text', text: answerText(typeof answer.text === 'string' ? answer.text : '', structured) }],
    structuredContent: structured as Record<string, unknown>,
    isError: answer.isError === true,
  };
}

/**
 * MCP progress for one call whose request carried `_meta.progressToken`: each CallProgress from the backend
 * becomes `notifications/progress` on this connection, strictly increasing (MCP requires it; a repeat is
 * dropped), until stop(). The SDK's sendNotification sends nothing once the request was cancelled.
 */
function progressSender(
  token: ProgressToken | undefined,
  sendNotification: (notification: ServerNotification) => Promise<void>,
  onError: (error: unknown) => void,
): { send: (p: CallProgress) => void; stop: () => void } | undefined {
  if (token === undefined) return undefined;
  let last = Number.NEGATIVE_INFINITY;
  let stopped = false;
  return {
    send: (p) => {
      if (stopped || typeof p.progress !== 'number' || !Number.isFinite(p.progress) || p.progress <= last) return;
      last = p.progress;
      const message = String(p.message).replace(/\s+/g, ' ').slice(0, progressMessageCharsMax);
      sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: p.progress, message },
      }).catch(onError);
    },
    stop: () => {
      stopped = true;
    },
  };
}

/**
 * `notifications/postern/action_recorded` for one call of a client that declared the capability (postern mcp): the
 * id of the action the call admitted, once its admission is durable (AgentBackend.call's onRecorded), until stop().
 */
function recordedSender(
  requestId: RequestId,
  sendNotification: (notification: ServerNotification) => Promise<void>,
  onError: (error: unknown) => void,
): { send: (actionId: string) => void; stop: () => void } {
  let stopped = false;
  return {
    send: (actionId) => {
      if (stopped) return;
      stopped = true;
      const notification = {
        method: actionRecordedNotification,
        params: { request_id: requestId, action_id: actionId },
      };
      // Not one of MCP's notifications: the SDK sends a method it does not know as it is.
      sendNotification(notification as unknown as ServerNotification).catch(onError);
    },
    stop: () => {
      stopped = true;
    },
  };
}
