import { readFileSync, readlinkSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Socket } from 'node:net';
import type { AgentPeer } from '../contract/index.js';
import { processExists } from '../ports/process-exists.js';
import { readPeerCredentials, type PeerCredentials } from './peer-credentials.js';

/**
 * Who is connecting, from the kernel and never from the client: pid/uid/gid from SO_PEERCRED,
 * then what /proc says about that pid. A field we cannot read is null, never guessed.
 *
 * A session is the AGENT process: when the connecting process is a `postern mcp` shim, the
 * identity is the MCP client behind it (see agentBehindShim), so a shim that reconnects after a
 * broker restart, or a new shim of the same agent, maps to the same session. uid and gid stay the
 * connecting process's own (SO_PEERCRED): admission is decided by who holds the socket.
 *
 * There is a window between connect() and our /proc reads in which the peer could exit and its
 * pid be reused; the start time lets a later reader tell the two apart, which is why a session is
 * (pid, start time) and not pid alone.
 */
export function readPeerIdentity(socket: Socket): AgentPeer {
  return describePeer(readPeerCredentials(socket));
}

/** Marks a start time we could not read (macOS, Windows, or /proc hidden): never equal to a real one. */
export const startTimeUnavailable = 'unavailable';

export function describePeer(credentials: PeerCredentials, procRoot = '/proc'): AgentPeer {
  const { uid, gid } = credentials;
  const pid = agentBehindShim(credentials.pid, uid, procRoot) ?? credentials.pid;
  const stat = readProcStat(pid, procRoot);
  const ppid = stat?.ppid ?? null;
  return {
    pid,
    uid,
    gid,
    start_time: stat?.startTime ?? startTimeUnavailable,
    ppid,
    exe: readLinkOrNull(`${procRoot}/${pid}/exe`),
    cwd: readLinkOrNull(`${procRoot}/${pid}/cwd`),
    parent_exe: ppid === null || ppid === 0 ? null : readLinkOrNull(`${procRoot}/${ppid}/exe`),
  };
}

/** Launcher chains are short (npx → sh -c → node); a deeper or cyclic one is not followed. */
const launcherHopsMax = 16;

/**
 * For a `postern mcp` shim: the first ancestor that is not a launcher (`npx` / `npm exec` and the
 * `sh -c` they run), i.e. the MCP client that started it — pid 1 or another user's process never
 * qualifies. undefined for anything else (an SDK agent connects itself and is its own session).
 *
 * argv is the process's own to rewrite, so this is a hint about WHICH ancestor, never a way to
 * reach a process that is not an ancestor: a process that dresses up as a shim gets the session of
 * its nearest non-launcher ancestor — which spawned it — and nothing else.
 */
export function agentBehindShim(pid: number, uid: number, procRoot = '/proc'): number | undefined {
  if (!isShimArgv(argvOf(pid, procRoot))) return undefined;
  let current = readProcStat(pid, procRoot)?.ppid;
  for (let hop = 0; hop < launcherHopsMax && current !== undefined && current > 1; hop += 1) {
    if (ownerUid(current, procRoot) !== uid) return undefined;
    if (!isLauncherArgv(argvOf(current, procRoot))) return current;
    current = readProcStat(current, procRoot)?.ppid;
  }
  return undefined;
}

const nodeOptionsWithValue = new Set([
  '-r',
  '--require',
  '--import',
  '--loader',
  '--experimental-loader',
  '-C',
  '--conditions',
  '--inspect-port',
  '--title',
  '--env-file',
]);

/**
 * `node [node's options] …/postern[.mjs] mcp …`, however it was installed (checkout, npm link, -g, npx cache). node's
 * own options come before the script: every launch passes the parked inspector port (broker/core/inspector-port.ts).
 */
export function isShimArgv(argv: readonly string[]): boolean {
  let scriptAt = -1;
  for (let index = 1; index < argv.length; index += 1) {
    const arg = argv[index] ?? '';
    if (!arg.startsWith('-')) {
      scriptAt = index;
      break;
    }
    // node's options that take their value as the next word (`-r dotenv/config`, `--import tsx`).
    if (nodeOptionsWithValue.has(arg)) index += 1;
  }
  if (scriptAt < 0) return false;
  const head = [argv[0] ?? '', argv[scriptAt] ?? ''];
  return argv.slice(scriptAt + 1).includes('mcp') && head.some((arg) => /(^|\/)postern(\.mjs)?$/.test(arg));
}

/** npx / `npm exec` (as themselves or as node running their CLI script), and the `sh -c` that runs the shim. */
export function isLauncherArgv(argv: readonly string[]): boolean {
  const names = argv.slice(0, 2).map((arg) => path.basename(arg));
  if (names.some((n) => n === 'npx' || n === 'npm' || n === 'npx-cli.js' || n === 'npm-cli.js')) return true;
  const shell = names[0];
  return (
    (shell === 'sh' || shell === 'dash' || shell === 'bash') &&
    argv[1] === '-c' &&
    /\bpostern\b.*\bmcp\b/.test(argv[2] ?? '')
  );
}

/** A process's argv from /proc (empty when it is gone or unreadable). */
export function argvOf(pid: number, procRoot: string): string[] {
  try {
    return readFileSync(`${procRoot}/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '');
  } catch {
    return [];
  }
}

/** The owner of /proc/<pid> (the process's effective uid; root for a non-dumpable one, which then does not qualify). */
function ownerUid(pid: number, procRoot: string): number | undefined {
  try {
    return statSync(`${procRoot}/${pid}`).uid;
  } catch {
    return undefined;
  }
}

export interface ProcStat {
  readonly ppid: number;
  /** Field 22: clock ticks after boot, kept as the kernel's decimal string (exact, comparable). */
  readonly startTime: string;
}

/**
 * Parses /proc/<pid>/stat. Field 2 (comm) is in parentheses and may itself contain spaces and
 * parentheses, so the fields after it are counted from the LAST ')' in the line. Returns undefined
 * for anything that does not look like a stat line.
 */
export function parseProcStat(text: string): ProcStat | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  // After ") " come field 3 (state), 4 (ppid), … 22 (starttime).
  const fields = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const ppidField = fields[1];
  const startField = fields[19];
  if (ppidField === undefined || startField === undefined) return undefined;
  if (!/^\d{1,10}$/.test(ppidField) || !/^\d{1,20}$/.test(startField)) return undefined;
  return { ppid: Number(ppidField), startTime: startField };
}

function readProcStat(pid: number, procRoot: string): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`${procRoot}/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

function readLinkOrNull(link: string): string | null {
  try {
    return readlinkSync(link);
  } catch {
    return null;
  }
}

/**
 * True iff the process `pid` still exists and is the same process (same start time). The session
 * sweeper uses it to end sessions whose agent died. Where start times cannot be read
 * (`startTimeUnavailable`: macOS, Windows) it can only say whether *some* process has that pid
 * (signal 0), which a reused pid fools; docs/agent.md says so.
 */
export function processAlive(pid: number, startTime: string, procRoot = '/proc'): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (startTime !== startTimeUnavailable) return readProcStat(pid, procRoot)?.startTime === startTime;
  return processExists(pid);
}
