import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { parseProcStat, readPeerCredentials } from '../agent/index.js';
import { CodedError, type SessionState } from '../contract/index.js';

/** Ancestor chains are short; a cycle or a very deep tree stops here. */
const ancestorsMax = 128;

/**
 * Agents can never approve — not through their socket, and not by running `postern approvals
 * approve` in a shell of their own either. The control socket asks the kernel who is connecting
 * (SO_PEERCRED), walks that process's ancestors in /proc, and refuses operator calls from any
 * process descended from a live agent session: the session's own process, or — when the session is
 * the `postern mcp` shim — the MCP client that launched it (the agent). Processes are compared by
 * (pid, start time), so a reused pid never matches.
 *
 * Limits (docs/queue.md): a same-user process that detaches from its agent (double fork to init)
 * leaves no ancestry to find; a same-user process can also read the data directory. The operator
 * boundary against a determined same-user program is the desktop UI's confirmation, not this check.
 */
export function createAgentDescendantGuard(options: { liveSessions: () => readonly SessionState[]; procRoot?: string }) {
  const procRoot = options.procRoot ?? '/proc';
  return (socket: Socket): CodedError | undefined => {
    let pid: number;
    try {
      pid = readPeerCredentials(socket).pid;
    } catch (error) {
      // Not knowing who asks is not a reason to trust them.
      return error instanceof CodedError ? error : new CodedError('PEER_REFUSED', 'the control socket could not identify its peer');
    }
    const chain = ancestry(pid, procRoot);
    for (const session of options.liveSessions()) {
      const agentProcesses = [`${session.pid}:${session.start_time}`];
      const parent = shimParent(session, procRoot);
      if (parent !== undefined) agentProcesses.push(parent);
      if (agentProcesses.some((p) => chain.has(p))) {
        return new CodedError('OPERATOR_ONLY', `this process descends from agent session ${session.session_id}; agents can never make operator decisions`, { field: 'op' });
      }
    }
    return undefined;
  };
}

/** `pid:starttime` of the process and each of its ancestors. */
export function ancestry(pid: number, procRoot = '/proc'): Set<string> {
  const chain = new Set<string>();
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

/** For a live `postern mcp` shim session: `pid:starttime` of its parent, the MCP client (the agent). */
function shimParent(session: SessionState, procRoot: string): string | undefined {
  const stat = readStat(session.pid, procRoot);
  if (stat === undefined || stat.startTime !== session.start_time) return undefined;
  if (!isShim(session.pid, procRoot)) return undefined;
  const parent = readStat(stat.ppid, procRoot);
  return parent === undefined ? undefined : `${stat.ppid}:${parent.startTime}`;
}

function isShim(pid: number, procRoot: string): boolean {
  try {
    const argv = readFileSync(`${procRoot}/${pid}/cmdline`, 'utf8').split('\0');
    return argv.includes('mcp') && argv.some((arg) => /postern(\.mjs)?$/.test(arg));
  } catch {
    return false;
  }
}

function readStat(pid: number, procRoot: string): ReturnType<typeof parseProcStat> {
  try {
    return parseProcStat(readFileSync(`${procRoot}/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}
