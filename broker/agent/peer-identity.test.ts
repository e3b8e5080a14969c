import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { brokerApiMethods } from '../contract/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { admitPeer } from './admit-peer.js';
import { jsonDepthExceeds } from './json-depth.js';
import { isOperatorName } from './operator-names.js';
import { describePeer, parseProcStat, processAlive, startTimeUnavailable } from './peer-identity.js';

/** A stat line with every field numbered after comm, so field 22 is recognisable. */
function statLine(comm: string, ppid = 77, start = '123456789'): string {
  const after = ['S', String(ppid)];
  for (let field = 5; field <= 21; field += 1) after.push(String(field));
  after.push(start, '23', '24');
  return `4242 (${comm}) ${after.join(' ')}\n`;
}

describe('parseProcStat', () => {
  it.each([
    ['a plain name', 'node'],
    ['spaces', 'my agent'],
    ['parentheses and a fake field list', 'x) S 1 2 3 (y'],
    ['a trailing paren', 'evil)'],
    ['an empty name', ''],
  ])('reads ppid and start time when comm has %s', (_when, comm) => {
    expect(parseProcStat(statLine(comm))).toEqual({ ppid: 77, startTime: '123456789' });
  });

  it.each([
    ['no parenthesis', '4242 node S 1 2'],
    ['too few fields', '4242 (node) S 1 2 3'],
    ['a non-numeric ppid', statLine('node').replace(' S 77 ', ' S x ')],
    ['an empty line', ''],
  ])('returns undefined for %s', (_when, text) => {
    expect(parseProcStat(text)).toBeUndefined();
  });

  it('matches what /proc says about this process', () => {
    const stat = parseProcStat(readFileSync('/proc/self/stat', 'utf8'));
    expect(stat?.ppid).toBe(process.ppid);
    expect(stat?.startTime).toMatch(/^\d+$/);
  });
});

describe('describePeer over a fake /proc', () => {
  let dir: TempDir;
  beforeEach(() => (dir = createTempDir('postern-proc-')));
  afterEach(() => dir.remove());

  it('reads exe, cwd and the parent exe, and leaves unreadable fields null', () => {
    const proc = dir.path;
    mkdirSync(path.join(proc, '4242'));
    mkdirSync(path.join(proc, '77'));
    writeFileSync(path.join(proc, '4242', 'stat'), statLine('agent (v2)'));
    symlinkSync('/usr/bin/agent', path.join(proc, '4242', 'exe'));
    symlinkSync('/home/u/project', path.join(proc, '4242', 'cwd'));
    symlinkSync('/usr/bin/claude', path.join(proc, '77', 'exe'));
    expect(describePeer({ pid: 4242, uid: 1000, gid: 1000 }, proc)).toEqual({
      pid: 4242,
      uid: 1000,
      gid: 1000,
      start_time: '123456789',
      ppid: 77,
      exe: '/usr/bin/agent',
      cwd: '/home/u/project',
      parent_exe: '/usr/bin/claude',
    });
    expect(describePeer({ pid: 5555, uid: 1000, gid: 1000 }, proc)).toEqual({
      pid: 5555,
      uid: 1000,
      gid: 1000,
      start_time: startTimeUnavailable,
      ppid: null,
      exe: null,
      cwd: null,
      parent_exe: null,
    });
  });
});

describe('processAlive', () => {
  it('is true for this process with its own start time, false with another', () => {
    const stat = parseProcStat(readFileSync(`/proc/${process.pid}/stat`, 'utf8'));
    expect(processAlive(process.pid, stat?.startTime ?? '')).toBe(true);
    expect(processAlive(process.pid, '1')).toBe(false);
  });

  it('is false once the process has exited', async () => {
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    const pid = child.pid ?? 0;
    const start = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.startTime ?? '';
    await new Promise((resolve) => child.once('exit', resolve));
    expect(processAlive(pid, start)).toBe(false);
  });

  it('is false for impossible pids', () => {
    expect(processAlive(0, '1')).toBe(false);
    expect(processAlive(-1, '1')).toBe(false);
    expect(processAlive(2 ** 40, '1')).toBe(false);
  });
});

describe('admitPeer', () => {
  const base = { ownUid: 1000 };
  it.each([
    ['the same uid', { ...base, peerUid: 1000 }, { admit: true }],
    ['another uid', { ...base, peerUid: 1001 }, { admit: false, code: 'PEER_REFUSED' }],
    ['root connecting to a user broker', { ...base, peerUid: 0 }, { admit: false, code: 'PEER_REFUSED' }],
    [
      'a broker whose own uid is unknown',
      { ...base, ownUid: -1, peerUid: 1000 },
      { admit: false, code: 'PEER_REFUSED' },
    ],
  ])('when %s', (_when, input, expected) => {
    expect(admitPeer(input)).toMatchObject(expected);
  });
});

describe('isOperatorName', () => {
  it.each([
    'status',
    'approve',
    'approvals.approve',
    'approval_decide',
    'reject',
    'abandon_ticket',
    'sessions/revoke',
    'revocation',
    'vault.unlock',
    'lock',
    'attest-outcome',
  ])('%s is operator-only', (name) => expect(isOperatorName(name)).toBe(true));
  it.each([...brokerApiMethods])('the operator API method %s is operator-only', (name) =>
    expect(isOperatorName(name)).toBe(true),
  );
  it.each([
    'http_request',
    'ssh_exec',
    'action_status',
    'fetch_result',
    'cancel_action',
    'list_routes',
    'tools/list',
    'delete_everything',
    'clock',
  ])('%s is not', (name) => expect(isOperatorName(name)).toBe(false));
});

describe('jsonDepthExceeds', () => {
  const bytes = (text: string): Buffer => Buffer.from(text);
  it.each([
    ['flat', '{"a":1}', 1, false],
    ['at the limit', '[[1]]', 2, false],
    ['one over', '[[[1]]]', 2, true],
    ['brackets inside strings', '{"a":"[[[[[[[["}', 1, false],
    ['escaped quotes inside strings', '{"a":"\\"[[[[["}', 1, false],
    ['an escaped backslash before the closing quote', '{"a":"\\\\"}', 1, false],
    ['objects and arrays mixed', '{"a":[{"b":[1]}]}', 3, true],
  ])('%s', (_when, text, limit, expected) => {
    expect(jsonDepthExceeds(bytes(text), limit)).toBe(expected);
  });
});
