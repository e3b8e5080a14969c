import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { agentBehindShim, describePeer, isLauncherArgv, isShimArgv } from './peer-identity.js';

/**
 * A fake /proc with the tree a real hookup makes:
 *   1 init ─ 300 claude ─ 400 npx-cli.js ─ 410 sh -c "postern mcp" ─ 420 node …/postern mcp
 *        └─ 500 node agent.js ─ 520 node …/postern.mjs mcp   (an agent launching the shim directly)
 *        └─ 620 node …/postern mcp                           (a shim whose parent is init)
 */
function statLine(pid: number, ppid: number, start: string): string {
  const after = ['S', String(ppid)];
  for (let field = 5; field <= 21; field += 1) after.push(String(field));
  after.push(start, '23');
  return `${pid} (node) ${after.join(' ')}\n`;
}
const tree: Array<[number, number, string[], string]> = [
  [1, 0, ['/sbin/init'], '/sbin/init'],
  [300, 1, ['/usr/bin/node', '/usr/bin/claude'], '/usr/bin/node'],
  [400, 300, ['/usr/bin/node', '/usr/lib/node_modules/npm/bin/npx-cli.js', 'postern', 'mcp'], '/usr/bin/node'],
  [410, 400, ['sh', '-c', 'postern mcp'], '/bin/dash'],
  [420, 410, ['/usr/bin/node', '/home/ann/app/node_modules/.bin/postern', 'mcp'], '/usr/bin/node'],
  [500, 1, ['/usr/bin/node', '/home/ann/agent.js'], '/usr/bin/node'],
  [520, 500, ['/usr/bin/node', '/opt/postern/bin/postern.mjs', 'mcp', '--data-dir', '/d'], '/usr/bin/node'],
  [620, 1, ['/usr/bin/node', '/opt/postern/bin/postern', 'mcp'], '/usr/bin/node'],
];

describe('the agent behind a postern mcp shim', () => {
  let dir: TempDir;
  const uid = process.getuid?.() ?? 0;
  beforeEach(() => {
    dir = createTempDir('postern-proc-shim-');
    for (const [pid, ppid, argv, exe] of tree) {
      const at = path.join(dir.path, String(pid));
      mkdirSync(at);
      writeFileSync(path.join(at, 'stat'), statLine(pid, ppid, `${pid}000`));
      writeFileSync(path.join(at, 'cmdline'), `${argv.join('\0')}\0`);
      symlinkSync(exe, path.join(at, 'exe'));
      symlinkSync(`/home/ann/cwd-${pid}`, path.join(at, 'cwd'));
    }
  });
  afterEach(() => dir.remove());

  it('walks past npx and its sh -c to the MCP client, and the session identity is that client', () => {
    expect(agentBehindShim(420, uid, dir.path)).toBe(300);
    expect(describePeer({ pid: 420, uid, gid: 1 }, dir.path)).toMatchObject({
      pid: 300,
      uid,
      gid: 1,
      start_time: '300000',
      ppid: 1,
      cwd: '/home/ann/cwd-300',
    });
  });

  it('takes the direct parent of a shim an agent launched itself', () => {
    expect(agentBehindShim(520, uid, dir.path)).toBe(500);
  });

  it('keeps the connecting process when it is no shim, when the parent is init, or when the parent is another user', () => {
    expect(agentBehindShim(500, uid, dir.path)).toBeUndefined();
    expect(describePeer({ pid: 500, uid, gid: 1 }, dir.path).pid).toBe(500);
    expect(agentBehindShim(620, uid, dir.path)).toBeUndefined();
    expect(agentBehindShim(520, uid + 1, dir.path)).toBeUndefined();
  });

  it.each([
    [['/usr/bin/node', '/x/bin/postern.mjs', 'mcp'], true],
    // As its shebang and the hookup lines start it: node's own option first.
    [['/usr/bin/node', '--inspect-port=192.0.2.1:9229', '/x/bin/postern.mjs', 'mcp'], true],
    [['node', '--inspect-port=192.0.2.1:9229', '/x/bin/postern.mjs', 'daemon'], false],
    [['node', '--inspect-port=192.0.2.1:9229'], false],
    [['node', '--inspect-port', '192.0.2.1:9229', '/x/bin/postern.mjs', 'mcp'], true],
    [['node', '-r', 'dotenv/config', '/x/bin/postern.mjs', 'mcp'], true],
    [['node', '/usr/local/bin/postern', 'mcp', '--data-dir', '/d'], true],
    [['node', '/x/bin/postern.mjs', 'daemon'], false],
    [['node', '/x/not-postern', 'mcp'], false],
    [['node', 'mcp', '/x/postern'], false],
  ])('recognises %j as a shim: %s', (argv, shim) => {
    expect(isShimArgv(argv)).toBe(shim);
  });

  it.each([
    [['npx', 'postern', 'mcp'], true],
    [['node', '/usr/lib/node_modules/npm/bin/npm-cli.js', 'exec', 'postern'], true],
    [['sh', '-c', '/usr/bin/node /opt/postern/bin/postern.mjs mcp'], true],
    [['sh', '-c', 'claude'], false],
    [['/usr/bin/node', '/usr/bin/claude'], false],
  ])('recognises %j as a launcher: %s', (argv, launcher) => {
    expect(isLauncherArgv(argv)).toBe(launcher);
  });
});
