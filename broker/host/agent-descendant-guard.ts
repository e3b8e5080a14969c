import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { argvOf, isLauncherArgv, isShimArgv, parseProcStat, readPeerCredentials } from '../agent/index.js';
import { CodedError, type SessionState } from '../contract/index.js';

/** Ancestor chains are short; a cycle or a very deep tree stops here. */
const ancestorsMax = 128;

/** A process as `pid:starttime` (a reused pid never matches). */
type ProcessKey = string;

export interface AgentDescendantGuard {
  /** The control socket's check: CodedError to refuse this peer's operator call, undefined to admit it. */
  refuse(socket: Socket): CodedError | undefined;
  /** The same decision for a pid (tests, and any other surface that knows its peer pid). */
  refusePid(pid: number): CodedError | undefined;
  /**
   * Called when a session opens, while its process is certainly alive: remembers the agent
   * process(es) behind it, so the guard still knows them after the session's own process (the shim)
   * has exited or been killed.
   */
  remember(sessionId: string, pid: number, startTime: string): void;
}

/**
 * Agents can never approve — not through their socket, and not by running `postern approvals
 * approve` in a shell of their own either. The control socket asks the kernel who is connecting
 * (SO_PEERCRED), walks that process's ancestors in /proc, and refuses operator calls from any
 * process descended from an agent:
 * - the session's own process (an SDK agent is its session), and
 * - for a `postern mcp` shim session, the MCP client that launched it — found by walking up past
 *   launcher processes (`npx`/`npm exec` and the `sh -c` they run), so `claude mcp add postern --
 *   npx postern mcp` finds Claude, not npm.
 * Sessions count while they are pending, approved or revoked (a revoked agent is still an agent);
 * agent processes remembered at session start count for as long as they live, even after the
 * session's shim is gone. Processes are compared by (pid, start time).
 *
 * This is a hint, not the boundary: a same-user process that detaches from its agent (double fork
 * to init) leaves no ancestry to find, and a sibling of an SDK agent is not refused (its shell may
 * be the person's own). What holds against those is the person's proof every decision needs on
 * the control socket (control-proof.ts: the vault passphrase typed on a terminal).
 */
export function createAgentDescendantGuard(options: {
  sessions: () => readonly SessionState[];
  procRoot?: string;
}): AgentDescendantGuard {
  const procRoot = options.procRoot ?? '/proc';
  const remembered = new Map<string, ProcessKey[]>();

  const agentProcesses = (): Array<{ session: string; key: ProcessKey }> => {
    const found: Array<{ session: string; key: ProcessKey }> = [];
    const seen = new Set<string>();
    for (const s of options.sessions()) {
      if (s.status === 'ended') continue;
      seen.add(s.session_id);
      for (const key of [
        `${s.pid}:${s.start_time}`,
        ...(remembered.get(s.session_id) ?? agentsBehind(s.pid, s.start_time, procRoot)),
      ]) {
        found.push({ session: s.session_id, key });
      }
    }
    // Sessions whose shim is gone: their agent still counts while it lives.
    for (const [session, keys] of remembered) {
      if (seen.has(session)) continue;
      for (const key of keys) if (alive(key, procRoot)) found.push({ session, key });
    }
    return found;
  };

  const refusePid = (pid: number): CodedError | undefined => {
    const chain = ancestry(pid, procRoot);
    const hit = agentProcesses().find((a) => chain.has(a.key));
    if (hit === undefined) return undefined;
    return new CodedError(
      'OPERATOR_ONLY',
      `this process descends from the agent of session ${hit.session}; agents can never make operator decisions`,
      { field: 'op' },
    );
  };

  return {
    refusePid,
    refuse: (socket) => {
      let pid: number;
      try {
        pid = readPeerCredentials(socket).pid;
      } catch (error) {
        // Not knowing who asks is not a reason to trust them.
        return error instanceof CodedError
          ? error
          : new CodedError('PEER_REFUSED', 'the control socket could not identify its peer');
      }
      return refusePid(pid);
    },
    remember: (sessionId, pid, startTime) => {
      const keys = agentsBehind(pid, startTime, procRoot);
      if (keys.length > 0) remembered.set(sessionId, keys);
    },
  };
}

/** `pid:starttime` of the process and each of its ancestors. */
export function ancestry(pid: number, procRoot = '/proc'): Set<ProcessKey> {
  const chain = new Set<ProcessKey>();
  let current = pid;
  for (let i = 0; i < ancestorsMax && current > 0; i += 1) {
    const stat = readStat(current, procRoot);
    if (stat === undefined) break;
    const key = `${current}:${stat.startTime}`;
    if (chain.has(key)) break;
    chain.add(key);
    current = stat.ppid;
  }
  return chain;
}

/**
 * For a live `postern mcp` shim: the first ancestor above it that is not a launcher (the MCP client,
 * i.e. the agent). Empty for any other session process (an SDK agent is its own session).
 */
function agentsBehind(pid: number, startTime: string, procRoot: string): ProcessKey[] {
  const stat = readStat(pid, procRoot);
  if (stat === undefined || stat.startTime !== startTime || !isShimArgv(argvOf(pid, procRoot))) return [];
  let current = stat.ppid;
  for (let i = 0; i < ancestorsMax && current > 1; i += 1) {
    const parent = readStat(current, procRoot);
    if (parent === undefined) return [];
    if (!isLauncherArgv(argvOf(current, procRoot))) return [`${current}:${parent.startTime}`];
    current = parent.ppid;
  }
  return [];
}

function alive(key: ProcessKey, procRoot: string): boolean {
  const [pid, startTime] = key.split(':');
  return readStat(Number(pid), procRoot)?.startTime === startTime;
}

function readStat(pid: number, procRoot: string): ReturnType<typeof parseProcStat> {
  try {
    return parseProcStat(readFileSync(`${procRoot}/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}
