import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionCounts {
  /** Connections the host holds now; never more than the cap once a new one has been placed. */
  open: number;
  /** Older connections closed to make room for a new one. */
  evicted: number;
  /** New connections closed at once because every held one was serving the operator. */
  dropped: number;
}

export interface ConnectionGuard {
  /** Marks the socket as serving an authenticated request until `res` closes: it is not evicted meanwhile. */
  hold(socket: Socket, res: ServerResponse): void;
  counts(): ConnectionCounts;
}

/**
 * Caps the connections of the operator host so a local process cannot take the daemon's file
 * descriptors. At the cap a new connection evicts the oldest one that is not serving an
 * authenticated request (a silent socket, an idle keep-alive, an unauthenticated caller), so
 * a flood of silent sockets cannot lock the operator out either: the operator's next connection
 * takes a flooder's place. Only when every held connection is the operator's is the new one dropped.
 */
export function guardConnections(server: Server, connectionsMax: number): ConnectionGuard {
  // Insertion order is age: the first entry that is not held is the oldest evictable one.
  const open = new Map<Socket, { held: number }>();
  let evicted = 0;
  let dropped = 0;
  server.on('connection', (socket: Socket) => {
    if (open.size >= connectionsMax) {
      const victim = [...open].find(([, state]) => state.held === 0)?.[0];
      if (victim === undefined) {
        dropped += 1;
        socket.destroy();
        return;
      }
      evicted += 1;
      open.delete(victim);
      victim.destroy();
    }
    open.set(socket, { held: 0 });
    socket.once('close', () => open.delete(socket));
  });
  return {
    hold(socket, res) {
      const state = open.get(socket);
      if (state === undefined) return;
      state.held += 1;
      res.once('close', () => (state.held -= 1));
    },
    counts: () => ({ open: open.size, evicted, dropped }),
  };
}
