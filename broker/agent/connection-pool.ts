import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { AgentPeer } from '../contract/index.js';
import { makeRoom } from './make-room.js';
import type { McpConnectionHandle } from './mcp-connection.js';

interface HeldEntry {
  readonly process: string;
  readonly pid: number;
  lastActive: number;
  handle: McpConnectionHandle | undefined;
}

/** What the socket needs to serve one admitted connection under the pool. */
export interface PoolSlot {
  /** Call on every message from the client (and answer to it): the pool's "least recently active". */
  readonly onActive: () => void;
  /** Hands the served connection to the pool, so it can ask whether it is busy and evict it. */
  served(handle: McpConnectionHandle): void;
}

/**
 * The agent socket's admitted connections, every one of the broker's own uid: what `connectionsPerUidMax`
 * counts. At the cap it evicts the connection make-room.ts picks (an idle one of the process holding the
 * most) or refuses the newcomer when every connection is busy. Activity is an increasing counter, no clock.
 */
export class ConnectionPool {
  private readonly held = new Map<Socket, HeldEntry>();
  private tick = 0;

  constructor(
    private readonly connectionsMax: number,
    private readonly logger: Logger | undefined,
  ) {}

  /** Admits `socket` (evicting another when at the cap); the refusal's message when none may go. */
  admit(socket: Socket, peer: AgentPeer): PoolSlot | string {
    const owner = processKey(peer);
    const refused = this.makeRoomFor(owner, peer);
    if (refused !== undefined) return refused;
    const entry: HeldEntry = { process: owner, pid: peer.pid, lastActive: this.next(), handle: undefined };
    this.held.set(socket, entry);
    socket.once('close', () => this.held.delete(socket));
    return {
      onActive: () => (entry.lastActive = this.next()),
      served: (handle) => (entry.handle = handle),
    };
  }

  private makeRoomFor(owner: string, peer: AgentPeer): string | undefined {
    const decision = makeRoom({
      newcomer: owner,
      held: [...this.held].map(([key, e]) => ({
        key,
        process: e.process,
        busy: e.handle?.busy() ?? false,
        lastActive: e.lastActive,
      })),
      connectionsMax: this.connectionsMax,
    });
    if (decision.kind === 'admit') return undefined;
    if (decision.kind === 'refuse') {
      this.logger?.info({ pid: peer.pid, code: decision.code }, 'agent connection refused: every connection is busy');
      return decision.message;
    }
    const victim = this.held.get(decision.victim);
    // busy() was read in this same turn, so the victim is idle; a handle that still refuses is a bug.
    if (victim?.handle?.evict(evictionNotice(this.connectionsMax)) !== true)
      throw new Error('the connection chosen for eviction could not be evicted');
    this.held.delete(decision.victim);
    this.logger?.info(
      { pid: victim.pid, for_pid: peer.pid, code: 'CONNECTION_EVICTED' },
      'idle agent connection evicted',
    );
    return undefined;
  }

  private next(): number {
    this.tick += 1;
    return this.tick;
  }
}

/** The session identity: one process (a shim's connection already names its agent process). */
function processKey(peer: AgentPeer): string {
  return `${peer.pid}:${peer.start_time}`;
}

function evictionNotice(connectionsMax: number): string {
  return `closed to make room for another agent connection (at most ${connectionsMax} per user; the idle connection of the process holding the most goes first); it had no call in progress, so nothing was lost: reconnect to go on`;
}
