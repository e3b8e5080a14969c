import { readdirSync, readFileSync } from 'node:fs';

/**
 * Each thread of a process and its nice value, from Linux's /proc/PID/task/TID/stat (field 19). Threads that end while
 * it reads are left out. Tests of CPU priority only; on a system without /proc it throws.
 */
export function threadNiceness(pid: number | 'self' = 'self'): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // The fields after the command name, which may hold spaces and parentheses: state is field 3, nice field 19.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(Number(tid), Number(fields[16]));
  }
  return out;
}
