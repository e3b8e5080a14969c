import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionState } from '../contract/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { ancestry, createAgentDescendantGuard } from './agent-descendant-guard.js';

/**
 * The guard over a fake /proc (stat + cmdline per pid), so every process-tree shape is exact:
 *
 *   1 init ─ 100 terminal ─┬─ 200 bash ─ 300 claude ─┬─ 400 npm exec (npx-cli.js) ─ 410 sh -c "postern mcp" ─ 420 node postern.mjs mcp  [session A]
 *                          │                          └─ 500 bash (the agent's tool shell) ─ 510 postern approvals approve
 *                          └─ 600 bash (the person's tab) ─┬─ 610 postern approvals approve
 *                                                          └─ 700 node my-agent.js [session B, SDK] ─ 710 postern approvals approve
 */
let proc: TempDir | undefined;
afterEach(() => {
  proc?.remove();
  proc = undefined;
});

function fakeProc(): string {
  proc = createTempDir('fake-proc-');
  const tree: Array<[number, number, string[]]> = [
    [1, 0, ['/sbin/init']],
    [100, 1, ['/usr/bin/gnome-terminal-server']],
    [200, 100, ['/bin/bash']],
    [300, 200, ['/usr/bin/node', '/usr/lib/claude/cli.js']],
    [400, 300, ['/usr/bin/node', '/usr/lib/node_modules/npm/bin/npx-cli.js', 'postern', 'mcp']],
    [410, 400, ['sh', '-c', 'postern mcp']],
    [420, 410, ['/usr/bin/node', '/home/ann/app/node_modules/.bin/postern', 'mcp']],
    [500, 300, ['/bin/bash', '-c', 'postern approvals approve 7']],
    [510, 500, ['/usr/bin/node', '/home/ann/app/node_modules/.bin/postern', 'approvals', 'approve', '7']],
    [600, 100, ['/bin/bash']],
    [610, 600, ['/usr/bin/node', '/home/ann/app/bin/postern.mjs', 'approvals', 'approve', '7']],
    [700, 600, ['/usr/bin/node', 'my-agent.js']],
    [710, 700, ['/usr/bin/node', '/home/ann/app/bin/postern.mjs', 'approvals', 'approve', '7']],
  ];
  for (const [pid, ppid, argv] of tree) {
    const dir = path.join(proc.path, String(pid));
    mkdirSync(dir);
    // Field 22 (start time) = pid * 10; comm with a space and a paren to exercise the parser.
    const rest = ['S', String(ppid), ...Array.from({ length: 17 }, () => '0'), String(pid * 10)];
    writeFileSync(path.join(dir, 'stat'), `${pid} (a b) c) ${rest.join(' ')} 0 0\n`);
    writeFileSync(path.join(dir, 'cmdline'), `${argv.join('\0')}\0`);
  }
  return proc.path;
}

function session(id: string, pid: number, status: SessionState['status'] = 'approved'): SessionState {
  return {
    session_id: id,
    status,
    pid,
    uid: 1000,
    start_time: String(pid * 10),
    ppid: null,
    exe: null,
    cwd: null,
    parent_exe: null,
    client_name: null,
    client_version: null,
    allowlist_withheld: null,
    approved_by: null,
    revoked_by: null,
    revoke_reason: null,
    end_reason: null,
    first_seq: 1,
    last_seq: 1,
    started_at_ms: 0,
    ended_at_ms: status === 'ended' ? 1 : null,
    updated_at_ms: 0,
    approved_at_ms: null,
    reconnects: 0,
  };
}

describe('the agent-descendant guard on the control socket', () => {
  it('walks ancestry by pid and start time', () => {
    const root = fakeProc();
    expect([...ancestry(510, root)]).toEqual(['510:5100', '500:5000', '300:3000', '200:2000', '100:1000', '1:10']);
  });

  it('refuses the agent behind an npx-launched shim and its other children, not the person in another tab', () => {
    const procRoot = fakeProc();
    const guard = createAgentDescendantGuard({ sessions: () => [session('ses_shim', 420)], procRoot });
    expect(guard.refusePid(510)).toMatchObject({ code: 'OPERATOR_ONLY' });
    expect(guard.refusePid(420)).toMatchObject({ code: 'OPERATOR_ONLY' });
    expect(guard.refusePid(610)).toBeUndefined();
  });

  it('refuses an SDK agent and its children; its launching shell stays the person’s', () => {
    const procRoot = fakeProc();
    const guard = createAgentDescendantGuard({ sessions: () => [session('ses_sdk', 700)], procRoot });
    expect(guard.refusePid(710)).toMatchObject({ code: 'OPERATOR_ONLY' });
    expect(guard.refusePid(610)).toBeUndefined();
    expect(guard.refusePid(510)).toBeUndefined();
  });

  it('keeps refusing a revoked session, and the remembered agent after its shim is gone', () => {
    const procRoot = fakeProc();
    let sessions = [session('ses_shim', 420, 'revoked')];
    const guard = createAgentDescendantGuard({ sessions: () => sessions, procRoot });
    expect(guard.refusePid(510)).toMatchObject({ code: 'OPERATOR_ONLY' });
    guard.remember('ses_shim', 420, '4200');
    rmSync(path.join(procRoot, '420'), { recursive: true });
    sessions = [session('ses_shim', 420, 'ended')];
    expect(guard.refusePid(510)).toMatchObject({ code: 'OPERATOR_ONLY' });
    // Once the agent itself is gone, nothing is refused any more.
    rmSync(path.join(procRoot, '300'), { recursive: true });
    expect(guard.refusePid(510)).toBeUndefined();
  });

  it('never matches a reused pid (different start time)', () => {
    const procRoot = fakeProc();
    const guard = createAgentDescendantGuard({
      sessions: () => [{ ...session('ses_old', 700), start_time: '1' }],
      procRoot,
    });
    expect(guard.refusePid(710)).toBeUndefined();
  });
});
