import type { ErrorCode } from '../contract/index.js';

/** One admitted connection as the cap sees it. */
export interface HeldConnection<K> {
  readonly key: K;
  /** The process it belongs to (pid + start time: the session identity; a shim counts as its agent). */
  readonly process: string;
  /** A request or call is in progress on it, or an answer carrying a result is being written: never evicted. */
  readonly busy: boolean;
  /** When it last sent a message, as an increasing counter (arrival order, no clock). */
  readonly lastActive: number;
}

export type RoomDecision<K> =
  | { readonly kind: 'admit' }
  | { readonly kind: 'evict'; readonly victim: K }
  | { readonly kind: 'refuse'; readonly code: Extract<ErrorCode, 'RATE_LIMITED'>; readonly message: string };

/**
 * Whether a new connection of `newcomer` fits under the per-user cap, and whom it displaces. Every agent
 * runs as the user, so the cap is shared: at the cap, the connection evicted is an idle one (no request in
 * progress) of the process that would hold the most connections, the newcomer's own included, and among
 * those the least recently active. So a process holding many idle connections cannot keep a new agent
 * out (its own go first), and it cannot push back out an agent that holds fewer than it does. A connection
 * with a call waiting (an approval can take minutes) is never evicted; when every one has, the newcomer
 * is refused. Pure: no clock, no sockets.
 */
export function makeRoom<K>(input: {
  readonly newcomer: string;
  readonly held: readonly HeldConnection<K>[];
  readonly connectionsMax: number;
}): RoomDecision<K> {
  const { newcomer, held, connectionsMax } = input;
  if (held.length < connectionsMax) return { kind: 'admit' };
  const perProcess = new Map<string, number>([[newcomer, 1]]);
  for (const connection of held) perProcess.set(connection.process, (perProcess.get(connection.process) ?? 0) + 1);
  let victim: HeldConnection<K> | undefined;
  for (const connection of held) {
    if (connection.busy) continue;
    if (victim === undefined || evictsBefore(connection, victim, perProcess)) victim = connection;
  }
  if (victim === undefined) {
    return {
      kind: 'refuse',
      code: 'RATE_LIMITED',
      message: `at most ${connectionsMax} agent connections per user, and every one has a call in progress; retry later`,
    };
  }
  return { kind: 'evict', victim: victim.key };
}

function evictsBefore<K>(a: HeldConnection<K>, b: HeldConnection<K>, perProcess: Map<string, number>): boolean {
  const heldByA = perProcess.get(a.process) ?? 0;
  const heldByB = perProcess.get(b.process) ?? 0;
  if (heldByA !== heldByB) return heldByA > heldByB;
  return a.lastActive < b.lastActive;
}
