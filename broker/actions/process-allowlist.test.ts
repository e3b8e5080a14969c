import { createHash } from 'node:crypto';
import { mkdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { processAlive } from '../agent/index.js';
import { allowlistSubjectId } from '../contract/index.js';
import { tcpListenerWithheld } from '../core/index.js';
import {
  codesignDetails,
  createFakeDarwinTools,
  lsofText,
  psStart,
  type FakeDarwinScript,
  type FakeDarwinTools,
} from '../testing/fake-codesign.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { loadNativeAddon } from '../host/native-addon.js';
import { ProcessAllowlist, type ListenerAddon } from './process-allowlist.js';

/**
 * The allowlist's darwin code path, run on Linux against SCRIPTED codesign / ps / lsof (broker/testing/fake-codesign.ts):
 * the identity is read with `codesign --verify --strict` then `codesign -d --verbose=2`, stored on the entry, and
 * needed to match. Real journal (SQLite in a temp dir), real files hashed; the process is this test's own (alive).
 */
const person = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
const team = 'ABCDE12345';
const identifier = 'com.example.agent';
const pid = process.pid;
const self = { pid, start_time: 'unavailable', exe: null };

let t: TempJournal;
let fake: FakeDarwinTools;
let agent: string;
let agentSha: string;

beforeEach(async () => {
  t = await openTempJournal();
  fake = createFakeDarwinTools(t.dir.path);
  agent = join(t.dir.path, 'Agent');
  writeFileSync(agent, 'agent executable bytes (test only)\n');
  agentSha = `sha256:${createHash('sha256').update('agent executable bytes (test only)\n').digest('hex')}`;
});
afterEach(async () => {
  await t.dispose();
});

function darwinAllowlist(): ProcessAllowlist {
  return new ProcessAllowlist({ journal: t.journal, processAlive, platform: 'darwin', darwinTools: fake.tools });
}

/** The process runs `agent`, its start time stays put, and codesign says what `over` says (default: signed, team). */
function script(over: Partial<FakeDarwinScript> = {}): void {
  fake.script({
    verify: 'pass',
    details: codesignDetails(agent, identifier, team),
    psStarts: [psStart(1)],
    lsof: lsofText(pid, [agent, '/usr/lib/dyld']),
    ...over,
  });
}

const cleanEnviron = 'HOME=/home/a\0PATH=/usr/bin\0';
const untraced = 'Name:\tagent\nTracerPid:\t0\n';

/** The descriptors of a process with no socket open: the listener check reads no table. */
const noSockets = { '0': '/dev/null', '1': 'pipe:[4242]' };
const tcpHeader = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
/** A /proc/<pid>/net/tcp row: `state` 0A is LISTEN, 01 ESTABLISHED. */
const tcpRow = (state: string, inode: number): string =>
  `   0: 0100007F:240D 00000000:0000 ${state} 00000000:00000000 00:00000000 00000000  1000        0 ${inode} 1 0 100 0 0 10 0\n`;

interface LinuxProcFiles {
  readonly environ?: string;
  readonly status?: string;
  /** fd number → link target (default: noSockets); null: no fd directory. */
  readonly fd?: Readonly<Record<string, string>> | null;
  /** net/tcp, net/tcp6 (absent: not written). */
  readonly tcp?: string;
  readonly tcp6?: string;
  /** ns/net link targets of the process and of the broker (`self`), e.g. `net:[4026531840]` (absent: not written). */
  readonly netns?: { readonly process: string; readonly broker: string };
}

/** This test's pid as a Linux /proc the test writes: `exe` links to `agent`, and the other files when given. */
function linuxProc(files: LinuxProcFiles): string {
  const procRoot = join(t.dir.path, 'proc');
  const dir = join(procRoot, String(pid));
  mkdirSync(join(dir, 'net'), { recursive: true });
  symlinkSync(agent, join(dir, 'exe'));
  const { fd = noSockets, tcp, tcp6, netns, ...text } = files;
  if (netns !== undefined) {
    mkdirSync(join(dir, 'ns'));
    mkdirSync(join(procRoot, 'self', 'ns'), { recursive: true });
    symlinkSync(netns.process, join(dir, 'ns', 'net'));
    symlinkSync(netns.broker, join(procRoot, 'self', 'ns', 'net'));
  }
  for (const [name, body] of Object.entries(text)) writeFileSync(join(dir, name), body);
  for (const [name, body] of Object.entries({ tcp, tcp6 }))
    if (body !== undefined) writeFileSync(join(dir, 'net', name), body);
  if (fd !== null) {
    mkdirSync(join(dir, 'fd'));
    for (const [n, target] of Object.entries(fd)) symlinkSync(target, join(dir, 'fd', n));
  }
  return procRoot;
}

async function addSigned(allowlist: ProcessAllowlist): Promise<string> {
  script();
  const added = await allowlist.add({ path: agent, expected_sha256: agentSha }, person);
  return added.entry.entry_id;
}

describe('when a person adds a signed executable on macOS', () => {
  it('the broker verifies it strictly, reads its identity and stores it on the entry (journaled, folded again)', async () => {
    const allowlist = darwinAllowlist();
    script();
    const added = await allowlist.add({ path: agent, expected_sha256: agentSha }, person);
    expect(added).toMatchObject({
      added: true,
      entry: { path: agent, sha256: agentSha, signing: { identifier, team_id: team } },
    });
    expect(fake.calls('codesign')).toEqual([`--verify --strict ${agent}`, `-d --verbose=2 ${agent}`]);
    const [event] = t.journal.subjectEvents(allowlistSubjectId);
    expect(event?.payload).toMatchObject({ signing: { identifier, team_id: team } });
    expect(darwinAllowlist().list().entries[0]?.signing).toEqual({ identifier, team_id: team });
    // The same executable with the same identity adds nothing.
    expect((await allowlist.add({ path: agent, expected_sha256: agentSha }, person)).added).toBe(false);
  });

  it.each([
    ['verify fails (unsigned or tampered)', { verify: 'fail' as const }],
    ['the signature has no team id', { details: codesignDetails('/x', identifier, null) }],
    ['the signature is ad-hoc', { details: codesignDetails('/x', identifier, team, true) }],
  ])('when %s the entry has no identity and matches by path + sha256 only', async (_name, over) => {
    const allowlist = darwinAllowlist();
    script(over);
    const added = await allowlist.add({ path: agent, expected_sha256: agentSha }, person);
    expect(added.entry.signing).toBeNull();
    expect(t.journal.subjectEvents(allowlistSubjectId)[0]?.payload).not.toHaveProperty('signing');
    script({ details: codesignDetails(agent, 'com.other.tool', 'ZZZZZ99999') });
    expect((await allowlist.identify(self))?.entry?.entry_id).toBe(added.entry.entry_id);
  });

  it.each([
    ['no Identifier line', `TeamIdentifier=${team}\n`],
    ['two Identifier lines', `Identifier=a.b\nIdentifier=c.d\nTeamIdentifier=${team}\n`],
    ['a malformed team id', `Identifier=${identifier}\nTeamIdentifier=abc\n`],
    ['a control character', `Identifier=${identifier}\u0007\nTeamIdentifier=${team}\n`],
  ])('codesign output with %s is refused EXECUTABLE_UNVERIFIABLE and nothing is appended', async (_name, details) => {
    const allowlist = darwinAllowlist();
    script({ details });
    await expect(allowlist.add({ path: agent, expected_sha256: agentSha }, person)).rejects.toMatchObject({
      code: 'EXECUTABLE_UNVERIFIABLE',
      field: 'path',
    });
    expect(t.journal.subjectEvents(allowlistSubjectId)).toHaveLength(0);
  });

  it('a codesign that cannot display a signature it verified is refused', async () => {
    script({ detailsExit: 1 });
    await expect(darwinAllowlist().add({ path: agent, expected_sha256: agentSha }, person)).rejects.toMatchObject({
      code: 'EXECUTABLE_UNVERIFIABLE',
    });
  });
});

describe('when an agent process opens a session on macOS', () => {
  it('path + sha256 + the same identity: the unscoped entry approves it (lsof names the file, ps dates it twice)', async () => {
    const allowlist = darwinAllowlist();
    const entryId = await addSigned(allowlist);
    script();
    const found = await allowlist.identify(self);
    expect(found?.entry?.entry_id).toBe(entryId);
    expect(found?.identity).toEqual({ path: agent, sha256: agentSha, signing: { identifier, team_id: team } });
    expect(fake.calls('lsof')).toEqual([`-n -P -w -a -p ${pid} -d txt -F n`]);
    expect(fake.calls('ps')).toEqual([`-o lstart= -p ${pid}`, `-o lstart= -p ${pid}`]);
  });

  it.each([
    ['codesign --verify fails now', { verify: 'fail' as const }],
    ['another team signed it', { details: codesignDetails(agent, identifier, 'ZZZZZ99999') }],
    ['another identifier', { details: codesignDetails(agent, 'com.example.other', team) }],
    ['it was re-signed ad-hoc', { details: codesignDetails(agent, identifier, team, true) }],
  ])('the same path and bytes are not matched when %s', async (_name, over) => {
    const allowlist = darwinAllowlist();
    await addSigned(allowlist);
    script(over);
    const found = await allowlist.identify(self);
    expect(found?.identity).toMatchObject({ path: agent, sha256: agentSha });
    expect(found?.entry).toBeUndefined();
  });

  it('a start time that changed while the file was read (the pid was reused) is not matched', async () => {
    const allowlist = darwinAllowlist();
    await addSigned(allowlist);
    script({ psStarts: [psStart(1), psStart(2)] });
    expect(await allowlist.identify(self)).toBeUndefined();
  });

  it('a process lsof names another executable for is not hashed or sign-checked', async () => {
    const allowlist = darwinAllowlist();
    await addSigned(allowlist);
    const before = fake.calls('codesign').length;
    script({ lsof: lsofText(pid, ['/usr/local/bin/other', agent]) });
    expect(await allowlist.identify(self)).toBeUndefined();
    expect(fake.calls('codesign')).toHaveLength(before);
  });

  it.each([
    ['for another pid', lsofText(pid + 1, ['/x'])],
    ['a relative path', lsofText(pid, ['Agent'])],
    ['no text file', `p${pid}\nfcwd\nn/tmp\n`],
  ])('lsof output naming %s is refused: no match', async (_name, lsof) => {
    const allowlist = darwinAllowlist();
    await addSigned(allowlist);
    script({ lsof });
    expect(await allowlist.identify(self)).toBeUndefined();
  });

  it('a person adds the session’s executable: identity read from the file lsof names, the session remembered', async () => {
    const allowlist = darwinAllowlist();
    await t.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: 'ses_darwin_01',
      payload: {
        ...self,
        uid: 501,
        ppid: 1,
        cwd: null,
        parent_exe: null,
        client_name: 'agent',
        client_version: '1',
      },
    });
    script();
    const added = await allowlist.add(
      { session_id: 'ses_darwin_01', expected_sha256: agentSha, routes: ['docs'] },
      person,
    );
    expect(added.entry).toMatchObject({ path: agent, from_session: 'ses_darwin_01', signing: { team_id: team } });
    const call = { approval: 'session', session_id: 'ses_darwin_01', target: 'route:docs GET /x' };
    expect(allowlist.approvalFor(call as never)).toEqual({ kind: 'policy', id: `allowlist:${added.entry.entry_id}` });
    script({ psStarts: [''] });
    await expect(
      allowlist.add({ session_id: 'ses_darwin_01', expected_sha256: agentSha }, person),
    ).rejects.toMatchObject({
      code: 'EXECUTABLE_UNVERIFIABLE',
      field: 'session_id',
    });
  });
});

describe('when the entry carries an identity but the broker runs on Linux', () => {
  it('it never matches (no identity is read there); an entry for the same path and bytes without one does', async () => {
    const signedId = await addSigned(darwinAllowlist());
    const procRoot = linuxProc({ environ: cleanEnviron, status: untraced });
    const linux = new ProcessAllowlist({ journal: t.journal, processAlive, platform: 'linux', procRoot });
    const running = { pid, start_time: 'unavailable', exe: agent };
    expect(await linux.identify(running)).toEqual({ identity: { path: agent, sha256: agentSha } });
    const plain = await linux.add({ path: agent, expected_sha256: agentSha }, person);
    expect(plain).toMatchObject({ added: true, entry: { signing: null } });
    expect(plain.entry.entry_id).not.toBe(signedId);
    expect((await linux.identify(running))?.entry?.entry_id).toBe(plain.entry.entry_id);
  });
});

describe('when the agent rewrites its executable between the person’s look and the add', () => {
  async function linuxSession(): Promise<ProcessAllowlist> {
    const procRoot = join(t.dir.path, 'proc');
    mkdirSync(join(procRoot, String(pid)), { recursive: true });
    symlinkSync(agent, join(procRoot, String(pid), 'exe'));
    await t.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: 'ses_linux_01',
      payload: {
        pid,
        start_time: 'unavailable',
        exe: agent,
        uid: 1000,
        ppid: 1,
        cwd: null,
        parent_exe: null,
        client_name: 'agent',
        client_version: '1',
      },
    });
    return new ProcessAllowlist({ journal: t.journal, processAlive, platform: 'linux', procRoot });
  }

  it('the preview shows the broker’s hash, and the add with it records those bytes', async () => {
    const allowlist = await linuxSession();
    const shown = await allowlist.preview({ session_id: 'ses_linux_01' });
    expect(shown).toEqual({ path: agent, sha256: agentSha, signing: null });
    const added = await allowlist.add({ session_id: 'ses_linux_01', expected_sha256: shown.sha256 }, person);
    expect(added.entry).toMatchObject({ path: agent, sha256: agentSha, from_session: 'ses_linux_01' });
  });

  it('the add is refused on expected_sha256 and nothing is journaled: the agent’s bytes are never recorded', async () => {
    const allowlist = await linuxSession();
    const shown = await allowlist.preview({ session_id: 'ses_linux_01' });
    writeFileSync(agent, 'the agent’s own bytes, written after the card was read\n');
    for (const input of [
      { session_id: 'ses_linux_01', expected_sha256: shown.sha256 },
      { path: agent, expected_sha256: shown.sha256 },
    ]) {
      await expect(allowlist.add(input, person)).rejects.toMatchObject({
        code: 'EXECUTABLE_UNVERIFIABLE',
        field: 'expected_sha256',
      });
    }
    expect(allowlist.list().entries).toEqual([]);
    expect(t.journal.subjectEvents(allowlistSubjectId, 10)).toEqual([]);
    // Looking again shows the new bytes; only an add naming them would record them.
    expect((await allowlist.preview({ path: agent })).sha256).not.toBe(shown.sha256);
  });
});

/**
 * The injection check's branches on Linux, with /proc written by the test (the attack itself, with real processes
 * under LD_PRELOAD, NODE_OPTIONS and strace, is performed in tests/process-allowlist.test.ts).
 */
describe('when an allowlisted executable runs in a process started with an injection variable or traced', () => {
  const running = { pid, start_time: 'unavailable', exe: '' };

  async function linuxWith(files: LinuxProcFiles): Promise<ProcessAllowlist> {
    const procRoot = linuxProc(files);
    const linux = new ProcessAllowlist({ journal: t.journal, processAlive, platform: 'linux', procRoot });
    await linux.add({ path: agent, expected_sha256: agentSha }, person);
    return linux;
  }

  it('a clean environment and no tracer: the entry applies', async () => {
    const linux = await linuxWith({ environ: cleanEnviron, status: untraced });
    expect((await linux.identify({ ...running, exe: agent }))?.entry?.path).toBe(agent);
  });

  it('LD_PRELOAD: no entry and no identity to remember, only why (the name, never the value)', async () => {
    const linux = await linuxWith({ environ: `${cleanEnviron}LD_PRELOAD=/tmp/palw-evil.so\0`, status: untraced });
    expect(await linux.identify({ ...running, exe: agent })).toEqual({ withheld: 'LD_PRELOAD set' });
  });

  it('a tracer: withheld', async () => {
    const linux = await linuxWith({ environ: cleanEnviron, status: 'TracerPid:\t4242\n' });
    expect(await linux.identify({ ...running, exe: agent })).toEqual({
      withheld: 'the process is being traced (ptrace)',
    });
  });

  it('an environment that cannot be read fails closed', async () => {
    const linux = await linuxWith({ status: untraced });
    expect(await linux.identify({ ...running, exe: agent })).toEqual({
      withheld: 'its environment or status could not be read',
    });
  });

  it('at a gate, a tracer attached since turns the allowlist’s approval into cards; a person’s approval stands', async () => {
    const linux = await linuxWith({ environ: cleanEnviron, status: untraced });
    const byEntry = { ...running, exe: agent, approved_by: 'policy:allowlist:alw_0000000000000001' };
    expect(linux.processUnchanged(byEntry)).toBe(true);
    writeFileSync(join(t.dir.path, 'proc', String(pid), 'status'), 'TracerPid:\t4242\n');
    expect(linux.processUnchanged(byEntry)).toBe(false);
    expect(linux.processUnchanged({ ...byEntry, approved_by: 'person:ann (cli)' })).toBe(true);
  });
});

/**
 * The listener check's branches (node's inspector opened by `kill -USR1` is a TCP listener of the process), with /proc
 * written by the test; the attack itself, with a real node process, its inspector and code evaluated through it, is
 * performed in tests/process-allowlist.test.ts.
 */
describe('when an allowlisted executable runs in a process that listens on a TCP port', () => {
  /** This test's process, running `agent` (named once beforeEach wrote it). */
  const running = (): { pid: number; start_time: string; exe: string } => ({
    pid,
    start_time: 'unavailable',
    exe: agent,
  });
  const listening = { environ: cleanEnviron, status: untraced, fd: { ...noSockets, '23': 'socket:[777]' } };

  async function linuxWith(files: LinuxProcFiles): Promise<ProcessAllowlist> {
    const linux = new ProcessAllowlist({
      journal: t.journal,
      processAlive,
      platform: 'linux',
      procRoot: linuxProc(files),
    });
    await linux.add({ path: agent, expected_sha256: agentSha }, person);
    return linux;
  }

  it('its socket is a LISTEN row of tcp, or of tcp6: withheld, naming the listener and no port', async () => {
    for (const tables of [
      { tcp: tcpHeader + tcpRow('0A', 777), tcp6: tcpHeader },
      { tcp: tcpHeader + tcpRow('01', 515), tcp6: tcpHeader + tcpRow('0A', 777) },
    ]) {
      rmSync(join(t.dir.path, 'proc'), { recursive: true, force: true });
      const linux = await linuxWith({ ...listening, ...tables });
      expect(await linux.identify(running())).toEqual({ withheld: tcpListenerWithheld });
    }
  });

  it('its sockets are not listening, or the listener is another process’s: the entry applies', async () => {
    const tcp = tcpHeader + tcpRow('01', 777) + tcpRow('0A', 515);
    const linux = await linuxWith({ ...listening, tcp, tcp6: tcpHeader });
    expect((await linux.identify(running()))?.entry?.path).toBe(agent);
  });

  it('no socket open: no table is read (none written here), the entry applies', async () => {
    const linux = await linuxWith({ environ: cleanEnviron, status: untraced });
    expect((await linux.identify(running()))?.entry?.path).toBe(agent);
  });

  it('a kernel without IPv6 (no tcp6) reads tcp alone', async () => {
    const linux = await linuxWith({ ...listening, tcp: tcpHeader + tcpRow('01', 777) });
    expect((await linux.identify(running()))?.entry?.path).toBe(agent);
  });

  it('no fd directory, no tcp table, or a table that does not parse: fails closed', async () => {
    const unreadable = { withheld: 'its open sockets could not be read' };
    for (const files of [
      { ...listening, fd: null },
      { ...listening, tcp6: tcpHeader },
      { ...listening, tcp: 'not a table\n', tcp6: tcpHeader },
      { ...listening, tcp: tcpHeader + '   0: 0100007F:240D 00000000:0000 0A\n', tcp6: tcpHeader },
    ]) {
      rmSync(join(t.dir.path, 'proc'), { recursive: true, force: true });
      expect(await (await linuxWith(files)).identify(running())).toEqual(unreadable);
    }
  });

  it('at a gate, an inspector opened since turns the allowlist’s approval into cards, for the life of the process', async () => {
    const linux = await linuxWith({ ...listening, tcp: tcpHeader + tcpRow('01', 777), tcp6: tcpHeader });
    const byEntry = { ...running(), approved_by: 'policy:allowlist:alw_0000000000000001' };
    expect(linux.processUnchanged(byEntry)).toBe(true);
    const tcp = join(t.dir.path, 'proc', String(pid), 'net', 'tcp');
    writeFileSync(tcp, tcpHeader + tcpRow('0A', 777));
    expect(linux.processUnchanged(byEntry)).toBe(false);
    // The inspector closed again (whatever was evaluated through it still runs): still cards.
    writeFileSync(tcp, tcpHeader + tcpRow('01', 777));
    expect(linux.processUnchanged(byEntry)).toBe(false);
    expect(linux.processUnchanged({ ...byEntry, approved_by: 'person:ann (cli)' })).toBe(true);
  });
});

/**
 * The listener check by the addon's sock_diag query (native/peercred listeningTcpInodes: the listening sockets of the
 * broker's network namespace), with a stand-in addon and /proc written by the test: used when the process's ns/net is
 * the broker's, the /proc tables otherwise or when the addon is missing, older, failing or answering nonsense.
 */
describe('when the listener check can ask the addon (sock_diag) instead of reading the tcp tables', () => {
  const running = (): { pid: number; start_time: string; exe: string } => ({
    pid,
    start_time: 'unavailable',
    exe: agent,
  });
  const sameNs = { process: 'net:[4026531840]', broker: 'net:[4026531840]' };
  const otherNs = { process: 'net:[4026532999]', broker: 'net:[4026531840]' };
  const listening = { environ: cleanEnviron, status: untraced, fd: { ...noSockets, '23': 'socket:[777]' } };
  const applies = (identified: unknown): boolean =>
    (identified as { entry?: { path?: string } } | undefined)?.entry?.path === agent;

  /** An addon stand-in answering `inodes` (thrown when an Error, called when a function), counting its calls. */
  function standIn(inodes: unknown): ListenerAddon & { calls: number } {
    const addon = {
      calls: 0,
      listeningTcpInodes: (): unknown => {
        addon.calls += 1;
        if (inodes instanceof Error) throw inodes;
        return typeof inodes === 'function' ? (inodes as () => unknown)() : inodes;
      },
    };
    return addon;
  }

  async function linuxWith(files: LinuxProcFiles, addon: ListenerAddon | Error): Promise<ProcessAllowlist> {
    rmSync(join(t.dir.path, 'proc'), { recursive: true, force: true });
    const procRoot = linuxProc(files);
    const linux = new ProcessAllowlist({ journal: t.journal, processAlive, platform: 'linux', procRoot, addon });
    await linux.add({ path: agent, expected_sha256: agentSha }, person);
    return linux;
  }

  it('the same namespace as the broker: the addon’s answer decides, and no table is read (none written here)', async () => {
    const listener = standIn([515, 777]);
    expect(await (await linuxWith({ ...listening, netns: sameNs }, listener)).identify(running())).toEqual({
      withheld: tcpListenerWithheld,
    });
    expect(listener.calls).toBe(1);
    const another = standIn([515]);
    expect(applies(await (await linuxWith({ ...listening, netns: sameNs }, another)).identify(running()))).toBe(true);
    expect(another.calls).toBe(1);
  });

  it('at a gate too: a listener the addon reports since turns the approval into cards', async () => {
    const inodes = [515];
    const addon = { listeningTcpInodes: (): number[] => inodes };
    const linux = await linuxWith({ ...listening, netns: sameNs }, addon);
    const byEntry = { ...running(), approved_by: 'policy:allowlist:alw_0000000000000001' };
    expect(linux.processUnchanged(byEntry)).toBe(true);
    inodes.push(777);
    expect(linux.processUnchanged(byEntry)).toBe(false);
  });

  it('another network namespace (or an unreadable ns link): the addon is not asked, its own tables are read', async () => {
    const listenerInItsNs = { tcp: tcpHeader + tcpRow('0A', 777), tcp6: tcpHeader };
    for (const netns of [otherNs, undefined]) {
      // The broker's namespace has no such listener; the process's own table has it (an inspector in its namespace).
      const addon = standIn([515]);
      const files = { ...listening, ...listenerInItsNs, ...(netns === undefined ? {} : { netns }) };
      expect(await (await linuxWith(files, addon)).identify(running())).toEqual({ withheld: tcpListenerWithheld });
      expect(addon.calls).toBe(0);
    }
    // …and its tables unreadable there fail closed, whatever the addon would say.
    const addon = standIn([]);
    expect(await (await linuxWith({ ...listening, netns: otherNs }, addon)).identify(running())).toEqual({
      withheld: 'its open sockets could not be read',
    });
  });

  it('the addon missing, older (no listeningTcpInodes), failing or answering nonsense: the tables, as before', async () => {
    const failing = Object.assign(new Error('from the addon'), { code: 'PEERCRED_SYSCALL_FAILED' });
    for (const addon of [
      Object.assign(new Error('not built'), { code: 'MODULE_NOT_FOUND' }),
      {},
      standIn(failing),
      standIn('777'),
      standIn([-1]),
      standIn(['777']),
    ]) {
      const tables = { tcp: tcpHeader + tcpRow('0A', 777), tcp6: tcpHeader };
      const withTables = await linuxWith({ ...listening, ...tables, netns: sameNs }, addon);
      expect(await withTables.identify(running())).toEqual({ withheld: tcpListenerWithheld });
      const quiet = { tcp: tcpHeader + tcpRow('01', 777), tcp6: tcpHeader };
      expect(
        applies(await (await linuxWith({ ...listening, ...quiet, netns: sameNs }, addon)).identify(running())),
      ).toBe(true);
      // Without tables it fails closed, as it always did.
      expect(await (await linuxWith({ ...listening, netns: sameNs }, addon)).identify(running())).toEqual({
        withheld: 'its open sockets could not be read',
      });
    }
  });

  it.skipIf(process.platform !== 'linux')(
    'the real addon: a socket of this process listening on 127.0.0.1 is found through it',
    async () => {
      const real = loadNativeAddon();
      if (real instanceof Error) throw real;
      expect(typeof real.listeningTcpInodes, 'postern-peercred has listeningTcpInodes (npm rebuild it)').toBe(
        'function',
      );
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const fd = (server as unknown as { _handle: { fd: number } })._handle.fd;
        const link = readlinkSync(`/proc/self/fd/${fd}`);
        const ownNs = readlinkSync('/proc/self/ns/net');
        const addon = standIn(real.listeningTcpInodes);
        const files = { ...listening, fd: { ...noSockets, '23': link }, netns: { process: ownNs, broker: ownNs } };
        expect(await (await linuxWith(files, addon)).identify(running())).toEqual({ withheld: tcpListenerWithheld });
        expect(addon.calls).toBe(1);
      } finally {
        server.close();
      }
    },
  );
});
