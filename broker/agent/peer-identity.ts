import { readFileSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { AgentPeer } from '../contract/index.js';
import { readPeerCredentials, type PeerCredentials } from './peer-credentials.js';

/**
 * Who is connecting, from the kernel and never from the client: pid/uid/gid from SO_PEERCRED,
 * then what /proc says about that pid. A field we cannot read is null, never guessed.
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
  const { pid, uid, gid } = credentials;
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
  const fields = text.slice(close + 1).trim().split(/\s+/);
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
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as { code?: unknown }).code === 'EPERM';
  }
}
