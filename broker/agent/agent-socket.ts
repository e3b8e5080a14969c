import { createServer, type Socket } from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { CodedError, isCodedError, type AgentPeer, type ErrorCode } from '../contract/index.js';
import type { AgentBackend } from '../ports/index.js';
import { admitPeer } from './admit-peer.js';
import { resolveAgentLimits, type AgentLimits } from './agent-limits.js';
import { jsonRpcCode, jsonRpcErrorLine } from './jsonrpc-error.js';
import { ConnectionPool } from './connection-pool.js';
import { serveMcpConnection } from './mcp-connection.js';
import { readPeerIdentity } from './peer-identity.js';
import { ensurePrivateDir, replaceStaleSocket, servePrivately, socketPathBytesMax } from './private-socket.js';
import { SessionRegistry } from './session-registry.js';
import { agentSocketDirName, agentSocketFileName, agentSocketPath } from './socket-path.js';

export { agentSocketDirName, agentSocketFileName, agentSocketPath };

export interface AgentSocketOptions {
  readonly dataDir: string;
  readonly backend: AgentBackend;
  readonly logger?: Logger;
  readonly limits?: Partial<AgentLimits>;
  /** serverInfo.version in the MCP handshake. */
  readonly version?: string;
  /** Who may connect; the broker's own uid unless a test says otherwise. */
  readonly ownUid?: number;
  /** How a peer is identified (tests substitute one to play another uid); defaults to the kernel's answer. */
  readonly identify?: (socket: Socket) => AgentPeer;
}

export interface AgentSocket {
  readonly path: string;
  /**
   * The broker is stopping, draining: no new connection is accepted and every new call on an open one is answered
   * SHUTTING_DOWN; calls already running keep their connection, so their callers get their answers. Idempotent.
   */
  stopAccepting(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The agents' door: a Unix socket, mode 0600 in a 0700 directory, speaking MCP one message per
 * line. Every connection is identified by the kernel (SO_PEERCRED + /proc) before a byte of it is
 * read; another uid or an unreadable identity gets one JSON-RPC error line and is closed, and at the
 * connection cap connection-pool.ts evicts an idle connection or refuses the new one the same way. Nothing a client sends may throw out of here: every socket has an error handler and
 * every per-connection failure ends only that connection. Closing it is the broker stopping: the calls that cuts
 * are aborted as `brokerStopping`, and nothing is recorded on their actions (recovery closes them at the next start).
 */
export async function startAgentSocket(options: AgentSocketOptions): Promise<AgentSocket> {
  const limits = resolveAgentLimits(options.limits);
  const socketPath = agentSocketPath(options.dataDir);
  if (Buffer.byteLength(socketPath) > socketPathBytesMax) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `the data directory path is too long for the agent socket (max ${socketPathBytesMax} bytes for the socket path)`,
      {
        field: '--data-dir',
      },
    );
  }
  ensurePrivateDir(path.dirname(socketPath));
  await replaceStaleSocket(socketPath);

  const { backend, logger } = options;
  const ownUid = options.ownUid ?? process.getuid?.() ?? -1;
  const identify = options.identify ?? readPeerIdentity;
  const connections = new Set<Socket>();
  let stopping = false;
  let draining = false;
  const pool = new ConnectionPool(limits.connectionsPerUidMax, logger);
  const sessions = sessionRegistry(limits, backend, logger);

  const server = createServer({ allowHalfOpen: false, pauseOnConnect: true }, (socket) => {
    socket.on('error', (error) => logger?.debug({ err: error }, 'agent socket error'));
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    try {
      accept(socket);
    } catch (error) {
      logger?.error({ err: error }, 'agent connection setup failed');
      socket.destroy();
    }
  });
  server.on('error', (error) => logger?.error({ err: error }, 'agent socket server error'));

  const accept = (socket: Socket): void => {
    let peer: AgentPeer;
    try {
      peer = identify(socket);
    } catch (error) {
      refuse(socket, 'PEER_REFUSED', isCodedError(error) ? error.message : 'the peer could not be identified');
      return;
    }
    const decision = admitPeer({ peerUid: peer.uid, ownUid });
    if (!decision.admit) {
      logger?.info({ pid: peer.pid, uid: peer.uid, code: decision.code }, 'agent connection refused');
      refuse(socket, decision.code, decision.message);
      return;
    }
    const slot = pool.admit(socket, peer);
    if (typeof slot === 'string') {
      refuse(socket, 'RATE_LIMITED', slot);
      return;
    }
    logger?.info({ pid: peer.pid, exe: peer.exe }, 'agent connected');
    const handle = serveMcpConnection({
      socket,
      peer,
      backend,
      limits,
      sessions,
      serverVersion: options.version ?? '0.0.0',
      logger,
      onActive: slot.onActive,
      brokerStopping: () => stopping,
      draining: () => draining,
    });
    slot.served(handle);
    socket.resume();
  };

  const served = await servePrivately(server, socketPath, connections);
  const stopAccepting = (): Promise<void> => {
    draining = true;
    return served.stopListening();
  };
  const close = (): Promise<void> => {
    stopping = draining = true;
    return served.close();
  };
  return { path: socketPath, stopAccepting, close };
}

/** Sessions by connection; the backend hears when a session's last connection went (a throw there is logged). */
function sessionRegistry(
  limits: AgentLimits,
  backend: AgentSocketOptions['backend'],
  logger: AgentSocketOptions['logger'],
): SessionRegistry {
  return new SessionRegistry(limits.inFlightCallsPerSessionMax, (sessionId) => {
    try {
      backend.sessionDisconnected(sessionId);
    } catch (error) {
      logger?.error({ err: error, session_id: sessionId }, 'sessionDisconnected threw');
    }
  });
}

/** One JSON-RPC error line (id null: nothing was read yet), then the connection ends. */
/** How long a refused connection is kept to let its peer read why (it is closed as soon as the peer closes). */
export const refusedLingerMs = 2_000;
/** Refused connections kept lingering at once; past it a refusal closes at once (a flood holds no more descriptors). */
export const refusedLingeringMax = 32;
let lingering = 0;

/**
 * Says why and closes. What the peer already sent (a reconnecting shim writes its initialize at once) is read and
 * dropped until it closes, bounded by refusedLingerMs: destroyed at once, the socket would close with those bytes
 * unread, or before they land, and the peer meets a reset or a broken pipe — on a loaded machine before it has read
 * this line — and learns only that the broker closed the connection, not why (RATE_LIMITED, PEER_REFUSED).
 */
function refuse(socket: Socket, code: ErrorCode, message: string): void {
  socket.end(jsonRpcErrorLine(null, jsonRpcCode.refused, message, code));
  if (lingering >= refusedLingeringMax) {
    socket.destroySoon();
    return;
  }
  lingering += 1;
  socket.on('data', () => undefined);
  socket.resume();
  const linger = setTimeout(() => socket.destroy(), refusedLingerMs);
  linger.unref();
  socket.once('close', () => {
    lingering -= 1;
    clearTimeout(linger);
  });
}
