import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createConnection, type Socket } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  controlConnectionsMax,
  controlSocketPath,
  sendControlRequest,
  type ControlRequest,
} from '../broker/host/control-socket.js';
import { createTempDir, type TempDir } from '../broker/testing/temp-dir.js';
import { repoRoot } from './support/postern-process.js';

/**
 * The control socket's connection cap against the CLI's client, the broker on its own event loop (a child process, as
 * a daemon is). The flake this pins down (seen once in tests/operator-proof.test.ts's flood): the client's connection
 * was accepted, and before the client wrote its request, enough newer connections arrived that the broker closed it
 * to make room — the client's write then failed with a raw `write EPIPE`. Here that order is forced: the test fills
 * the cap with idle connections, starts the request, opens as many again, and holds its own event loop (so the
 * client cannot write) until the broker has accepted every one of them; only then may the client write.
 */
const passphrase = 'control socket cap passphrase (test only)';
const childPath = path.join(repoRoot, 'tests', 'support', 'control-socket-child.ts');
const acceptWaitMs = 10_000;

let dir: TempDir;
let child: ChildProcess;
let socketPath: string;
const opened: Socket[] = [];

beforeEach(async () => {
  dir = createTempDir('pcap-');
  child = spawn(process.execPath, ['--import', 'tsx', childPath, dir.path, passphrase], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const stdout = child.stdout;
  if (stdout === null) throw new Error('the child has no stdout');
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: stdout }).on('line', (line) => line === 'ready' && resolve());
    child.once('exit', (code) => reject(new Error(`the control socket child exited (${code})`)));
  });
  socketPath = controlSocketPath(dir.path);
});

afterEach(async () => {
  for (const socket of opened.splice(0)) socket.destroy();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.stdin?.end();
  await exited;
  dir.remove();
});

/** A raw connection that sends nothing; whatever the broker writes to it is collected in `lines`. */
function rawConnection(): { socket: Socket; lines: string[]; closed: Promise<void> } {
  const socket = createConnection(socketPath);
  opened.push(socket);
  const lines: string[] = [];
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    lines.splice(0, lines.length, ...text.split('\n').filter((l) => l !== ''));
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, lines, closed };
}

/** Connections waiting in the listen queue, not yet accepted by the broker (`ss` reads Recv-Q of the listener). */
function backlog(): number {
  const row = execFileSync('ss', ['-xlnH', 'src', socketPath], { encoding: 'utf8' }).trim();
  const recvQ = Number(row.split(/\s+/)[2]);
  if (!Number.isInteger(recvQ)) throw new Error(`no listener row from ss: ${row}`);
  return recvQ;
}

/** Blocks this process's event loop (not the broker's) until the broker has accepted every queued connection. */
function holdLoopUntilAccepted(): void {
  const deadline = Date.now() + acceptWaitMs;
  while (backlog() > 0) {
    if (Date.now() > deadline) throw new Error('the broker did not accept the queued connections');
  }
  // The last accept's callback (which closes the connection it displaces) runs just after its accept().
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
}

/**
 * `request` sent while the broker closes its connection before the client's first byte: the cap full of idle
 * connections, the client's connection accepted, then as many newer ones, all accepted before the client may write.
 */
async function sendEvictedBeforeWrite(
  request: Exclude<ControlRequest, { op: 'api' }>,
): Promise<{ settled: unknown; first: ReturnType<typeof rawConnection>[] }> {
  const first = Array.from({ length: controlConnectionsMax }, rawConnection);
  await Promise.all(first.map(({ socket }) => new Promise((resolve) => socket.once('connect', resolve))));
  const reply = sendControlRequest(socketPath, request).then(
    (value) => value,
    (error: unknown) => error,
  );
  for (let i = 0; i < controlConnectionsMax; i += 1) rawConnection();
  holdLoopUntilAccepted();
  return { settled: await reply, first };
}

describe('the control socket at its connection cap', () => {
  it('answers a request whose connection the broker closed before the client wrote (never a raw write EPIPE)', async () => {
    const { settled } = await sendEvictedBeforeWrite({ op: 'vault_status' });
    expect(settled).toEqual({ ok: true, value: { state: 'locked', credentials: 0 } });
  });

  it('carries out an unlock closed unread before its first byte exactly as if it had not been closed', async () => {
    const { settled } = await sendEvictedBeforeWrite({ op: 'unlock', passphrase });
    expect(settled).toEqual({ ok: true, value: { state: 'unlocked' } });
    expect(await sendControlRequest(socketPath, { op: 'vault_status' })).toMatchObject({
      value: { state: 'unlocked' },
    });
  });

  it('tells each idle connection it closes to make room, with CONTROL_SOCKET_BUSY, before closing it', async () => {
    const { first } = await sendEvictedBeforeWrite({ op: 'vault_status' });
    await Promise.all(first.map(({ closed }) => closed));
    for (const { lines } of first) {
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ ok: false, error: { code: 'CONTROL_SOCKET_BUSY' } });
    }
  });
});
