import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SshChannel } from '../channels/ssh/index.js';
import { systemClock } from '../ports/system-clock.js';
import {
  openSshActionHarness,
  sshHostsConfig,
  type SshActionHarness,
  type SshHostYaml,
} from '../testing/ssh-action-harness.js';
import { TestSshd } from '../testing/test-sshd.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';
import type { DispatchGate } from '../ports/index.js';
import { buildCast } from './ssh-recording.js';

const unavailable = TestSshd.unavailableReason();
let sshd: TestSshd | undefined;
let h: SshActionHarness;

beforeAll(async () => {
  if (unavailable !== undefined) {
    console.warn(`real-sshd recording tests skipped: ${unavailable}`);
    return;
  }
  sshd = await TestSshd.start();
  h = await openSshActionHarness({
    'lab-key': { privateKey: sshd.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] },
  });
  // The wall clock, not the harness's manual one: the recording's timing is what is under test.
  h.channel = new SshChannel({
    gate: h.temp.journal,
    clock: systemClock,
    knownHostsDir: h.temp.dir.path,
    vault: h.vault,
  });
}, 30_000);
afterAll(async () => {
  await sshd?.dispose();
  await h?.dispose();
});

const need = (ctx: { skip: (note?: string) => never }): TestSshd => TestSshd.required(sshd, ctx);

function host(s: TestSshd, extra = '    approval: none'): SshHostYaml {
  return { port: s.port, user: s.user, credential: 'lab-key', hostKey: [s.hostKey.fingerprint], extra };
}

type Event = [number, string, string];

function parseCast(cast: Buffer): { header: Record<string, unknown>; events: Event[] } {
  const [first, ...rest] = cast.toString('utf8').trimEnd().split('\n');
  return {
    header: JSON.parse(first ?? '') as Record<string, unknown>,
    events: rest.map((l) => JSON.parse(l) as Event),
  };
}

describe('when an SSH command writes to stdout and stderr over time', () => {
  it('the recording replays its output in arrival order, stderr as "e", with times that never go back', async (ctx) => {
    const s = need(ctx);
    const { envelope } = await h.run(sshHostsConfig([host(s)]), {
      host: 'lab',
      command: 'printf first; sleep 0.3; printf second >&2; sleep 0.3; printf third',
    });
    expect(envelope.effect).toBe('succeeded');
    const recording = h.results.recordings.read(envelope.invocation_id);
    expect(recording.recording_id).toBe(`rec_${envelope.invocation_id.slice(4)}`);
    const { header, events } = parseCast(recording.cast);
    expect(header).toMatchObject({ version: 2, width: 80, height: 24 });
    expect(header.timestamp).toBeGreaterThan(1_600_000_000);
    expect(events.map(([, code, data]) => [code, data])).toEqual([
      ['o', 'first'],
      ['e', 'second'],
      ['o', 'third'],
    ]);
    const times = events.map(([t]) => t);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // The remote slept between the writes: the recording keeps the pauses, relative to the exec request.
    expect((times[1] ?? 0) - (times[0] ?? 0)).toBeGreaterThan(0.15);
    expect((times[2] ?? 0) - (times[1] ?? 0)).toBeGreaterThan(0.15);
    expect(recording.truncated).toBe(false);
  });
});

describe('when the output passes the host entry output_bytes_max', () => {
  it('the recording holds exactly the bytes the result keeps, then a truncation marker', async (ctx) => {
    const s = need(ctx);
    const config = sshHostsConfig([host(s, '    approval: none\n    output_bytes_max: 1000')]);
    const { envelope, output } = await h.run(config, { host: 'lab', command: "head -c 5000 /dev/zero | tr '\\0' a" });
    expect(output).toMatchObject({ truncated: true, stdout_bytes: 5000 });
    const recording = h.results.recordings.read(envelope.invocation_id);
    const { events } = parseCast(recording.cast);
    const recorded = events
      .filter(([, code]) => code === 'o')
      .map(([, , data]) => data)
      .join('');
    expect(recorded).toBe(output?.stdout.toString());
    expect(recorded.length).toBe(1000);
    expect(events.at(-1)).toEqual([
      expect.any(Number),
      'm',
      'postern: output truncated: 5000 bytes received, the first 1000 kept (output_bytes_max)',
    ]);
    expect(recording.truncated).toBe(true);
  });
});

describe('when the host prints the key material it was given', () => {
  it('the recording holds the scrubbed output, never the key line', async (ctx) => {
    const s = need(ctx);
    const keyLine = s.userKey.privateKey
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))[3];
    expect(keyLine?.length).toBeGreaterThan(16);
    const { envelope } = await h.run(sshHostsConfig([host(s)]), {
      host: 'lab',
      command: `printf 'before '; sleep 0.1; printf '%s' '${keyLine ?? ''}'; sleep 0.1; printf ' after'`,
    });
    const cast = h.results.recordings.read(envelope.invocation_id).cast.toString('utf8');
    expect(cast).not.toContain(keyLine);
    expect(cast).toContain('[REDACTED]');
    expect(parseCast(Buffer.from(cast)).events.filter(([, c]) => c === 'o')).toHaveLength(1);
  });
});

describe('when the recording store refuses the open row before exec', () => {
  it('the action is not_attempted with RECORDING_UNAVAILABLE and the command never ran', async (ctx) => {
    const s = need(ctx);
    const marker = join(h.temp.dir.path, 'ran-unrecorded');
    // A real store failure: the journal file itself refuses the row (as a full disk or a broken table would).
    const db = new Database(h.temp.path);
    db.exec(`CREATE TRIGGER refuse_recordings BEFORE INSERT ON recordings BEGIN SELECT RAISE(ABORT, 'refused'); END`);
    try {
      const { envelope } = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: `touch '${marker}'` });
      expect(envelope.error).toMatchObject({
        code: 'RECORDING_UNAVAILABLE',
        outcome: 'not_attempted',
        phase: 'credential_injection',
      });
      const kinds = h.events(envelope.invocation_id).map((e) => e.kind);
      expect(kinds).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'OUTCOME_RECORDED']);
      expect(existsSync(marker)).toBe(false);
      expect(h.temp.journal.stats().state).toBe('open');
      expect(() => h.results.recordings.read(envelope.invocation_id)).toThrow(
        expect.objectContaining({ code: 'NOT_FOUND' }),
      );
    } finally {
      db.exec('DROP TRIGGER refuse_recordings');
      db.close();
    }
    // The same command once the store works again: it runs, so the marker above proved something.
    const again = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: `touch '${marker}'` });
    expect(again.envelope.effect).toBe('succeeded');
    expect(existsSync(marker)).toBe(true);
  });
});

describe('when the journal fails at the dispatch boundary, so the exec request is never sent', () => {
  it('the recording is sealed with the mark that nothing was sent, never left open (RECORDING_INCOMPLETE)', async (ctx) => {
    const s = need(ctx);
    const disk = new DiskSyncGate();
    const failing = await openSshActionHarness(
      { 'lab-key': { privateKey: s.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] } },
      { beforeSync: disk.beforeSync },
    );
    const journal = failing.temp.journal;
    // The real journal; its disk fails the sync that would make DISPATCH_STARTED durable.
    const gate: DispatchGate = {
      append: (event) => journal.append(event),
      appendLater: (event) => journal.appendLater(event),
      commitHeld: () => journal.commitHeld(),
      beginDispatch: (actionId, attempt, connection) => {
        disk.fail();
        return journal.beginDispatch(actionId, attempt, connection);
      },
    };
    failing.channel = failing.newChannel({}, gate);
    const marker = join(failing.temp.dir.path, 'ran-without-boundary');
    try {
      const { envelope } = await failing.run(sshHostsConfig([host(s)]), { host: 'lab', command: `touch '${marker}'` });
      expect(envelope.error).toMatchObject({ code: 'JOURNAL_UNAVAILABLE', outcome: 'unknown' });
      expect(existsSync(marker)).toBe(false);
      const recording = failing.results.recordings.read(envelope.invocation_id);
      const { events } = parseCast(recording.cast);
      expect(events).toEqual([[0, 'm', 'postern: the exec request was never sent']]);
    } finally {
      await failing.dispose();
    }
  });
});

/** A fault seam: the real channel runs the command, then perform throws instead of returning its report. */
class ThrowsAfterPerform extends SshChannel {
  override async perform(...args: Parameters<SshChannel['perform']>): ReturnType<SshChannel['perform']> {
    await super.perform(...args);
    throw new Error('the channel failed after the command ran');
  }
}

describe('when the channel throws after the exec request was sent, so it gives no report', () => {
  it('the recording is sealed with the mark that whether it was sent is not known, never that it was never sent', async (ctx) => {
    const s = need(ctx);
    const throwing = await openSshActionHarness({
      'lab-key': { privateKey: s.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] },
    });
    throwing.channel = new ThrowsAfterPerform({
      gate: throwing.temp.journal,
      clock: throwing.temp.clock,
      knownHostsDir: throwing.temp.dir.path,
      vault: throwing.vault,
    });
    const marker = join(throwing.temp.dir.path, 'ran-then-threw');
    try {
      const run = throwing.run(sshHostsConfig([host(s)]), { host: 'lab', command: `touch '${marker}'` });
      await expect(run).rejects.toThrow('the channel failed after the command ran');
      expect(existsSync(marker)).toBe(true);
      const actionId = [...throwing.temp.journal.events()].find((e) => e.kind === 'DISPATCH_STARTED')?.action_id ?? '';
      expect(actionId).not.toBe('');
      const { events } = parseCast(throwing.results.recordings.read(actionId).cast);
      expect(events).toEqual([
        [0, 'm', 'postern: the channel gave no report; whether the exec request was sent is not known'],
      ]);
    } finally {
      await throwing.dispose();
    }
  });
});

describe('when the journal files are searched for the recorded output', () => {
  it('the output canary is in the opened recording but in no byte of journal.sqlite or its -wal', async (ctx) => {
    const s = need(ctx);
    const canary = 'CANARY-recording-5b2f90c1';
    const { envelope } = await h.run(sshHostsConfig([host(s)]), {
      host: 'lab',
      command: `echo ${canary.replace('-', '""-')}`,
    });
    expect(h.results.recordings.read(envelope.invocation_id).cast.toString('utf8')).toContain(canary);
    const files = readdirSync(h.temp.dir.path).filter((n) => n.startsWith('journal.sqlite'));
    expect(files).toContain('journal.sqlite');
    for (const name of files) expect(readFileSync(join(h.temp.dir.path, name)).includes(canary), name).toBe(false);
  });
});

describe('buildCast', () => {
  const base = {
    actionId: 'act_1',
    hostName: 'lab',
    execAtMs: 1_700_000_000_500,
    redacted: { stdout: false, stderr: false },
    truncated: false,
  };

  it('keeps a UTF-8 character split between two pieces whole, and never renders a NUL or escape unescaped', () => {
    const bytes = Buffer.from('é\u001b[31mred\u0000', 'utf8');
    const cast = buildCast({
      ...base,
      stdout: bytes,
      stderr: Buffer.alloc(0),
      marks: [
        { stream: 'stdout', atMs: 0, bytes: 1 },
        { stream: 'stdout', atMs: 250, bytes: bytes.length - 1 },
      ],
      receivedBytes: bytes.length,
    }).toString('utf8');
    const { header, events } = parseCast(Buffer.from(cast));
    expect(header.timestamp).toBe(1_700_000_000);
    expect(events.map(([, , d]) => d).join('')).toBe('é\u001b[31mred\u0000');
    expect(events.at(-1)?.[0]).toBe(0.25);
    expect(cast).not.toContain('\u0000');
    expect(cast).not.toContain('\u001b');
  });

  it('a redacted stream is one event at its first piece, the other stream keeps its timing', () => {
    const cast = buildCast({
      ...base,
      stdout: Buffer.from('a [REDACTED] b'),
      stderr: Buffer.from('warn'),
      marks: [
        { stream: 'stdout', atMs: 10, bytes: 2 },
        { stream: 'stderr', atMs: 20, bytes: 4 },
        { stream: 'stdout', atMs: 30, bytes: 30 },
      ],
      redacted: { stdout: true, stderr: false },
      receivedBytes: 36,
    });
    expect(parseCast(cast).events).toEqual([
      [0.01, 'o', 'a [REDACTED] b'],
      [0.02, 'e', 'warn'],
    ]);
  });
});
