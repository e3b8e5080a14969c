import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { JournalEvent } from '../contract/index.js';
import type { DispatchGate } from '../ports/index.js';
import { MisbehavingSshServer, type SshBehavior } from '../testing/misbehaving-ssh-server.js';
import { abandonBlockedHeads, waitForCards } from '../testing/queue-waits.js';
import { openSshActionHarness, sshHostsConfig, type SshActionHarness } from '../testing/ssh-action-harness.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { generateKey } from '../testing/test-sshd.js';

let h: SshActionHarness;
let keyDir: TempDir;
const servers: MisbehavingSshServer[] = [];

beforeAll(async () => {
  keyDir = createTempDir('postern-ssh-keys-');
  const key = generateKey(keyDir.path, 'agent', 'misbehaving-test-key');
  h = await openSshActionHarness({ 'lab-key': { privateKey: key.privateKey, bindings: ['lab'] } });
});
afterEach(async () => {
  // An unknown outcome blocks lane host:lab (by design); the next case needs it released.
  await abandonBlockedHeads(h.queue);
  h.channel = h.newChannel();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  await h.dispose();
  keyDir.remove();
});

async function server(behavior: SshBehavior): Promise<MisbehavingSshServer> {
  const s = await MisbehavingSshServer.start(behavior, { journalPath: h.temp.path });
  servers.push(s);
  return s;
}

function configFor(s: MisbehavingSshServer) {
  return sshHostsConfig([{ port: s.port, user: 'agent', credential: 'lab-key', hostKey: [s.hostKeyFingerprint] }]);
}

const kinds = (events: JournalEvent[]) => events.map((e) => e.kind);
const dispatched = [
  'ACTION_ACCEPTED',
  'PREFLIGHT_VALIDATED',
  'CREDENTIAL_AUTHORIZED',
  'DISPATCH_STARTED',
  'REQUEST_SENT',
];

/** The events of the action's sealed recording (asciicast v2), header left off. */
function recordingEvents(actionId: string): unknown[] {
  const lines = h.results.recordings.read(actionId).cast.toString('utf8').trimEnd().split('\n');
  return lines.slice(1).map((l) => JSON.parse(l) as unknown);
}

const outputCut = 'postern: the session ended before its output did; output after this may be missing';

/** The server received the exec request only after DISPATCH_STARTED was visible to its own connection. */
function expectDispatchDurableBeforeExec(s: MisbehavingSshServer): void {
  const exec = s.log.find((e) => e.event === 'exec_received');
  expect(exec?.dispatchRowsVisible).toBeGreaterThanOrEqual(1);
}

describe('when the server misbehaves after dispatch', () => {
  it('exec accepted, then the channel closes without exit-status: REMOTE_RESULT_INCOMPLETE / unknown', async () => {
    const s = await server('close_without_exit');
    const { envelope, output } = await h.run(configFor(s), { host: 'lab', command: 'deploy --now' });
    expect(s.log.map((e) => e.event)).toEqual([
      'session_opened',
      'exec_received',
      'exec_accepted',
      'stdout_written',
      'channel_closed',
    ]);
    expectDispatchDurableBeforeExec(s);
    expect(envelope.error).toMatchObject({
      code: 'REMOTE_RESULT_INCOMPLETE',
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
    });
    expect(envelope).toMatchObject({
      effect: 'unknown_effect',
      outcome_basis: 'no_exit_status_or_remote_process_identity',
      caller_disposition: 'completed',
    });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: true,
      response_complete: false,
      dispatch_evidence: 'remote_receipt',
    });
    expect(envelope.evidence.attempts).toEqual([
      {
        n: 1,
        stage: 'dispatch_started',
        outcome: 'unknown',
        code: 'REMOTE_RESULT_INCOMPLETE',
        connection_id: expect.any(String),
      },
    ]);
    expect(output).toBeUndefined();
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      ...dispatched,
      'REMOTE_RESPONSE_STARTED',
      'OUTPUT_RECEIVED',
      'OUTPUT_RECEIVED',
      'CHANNEL_CLOSED',
      'OUTCOME_RECORDED',
    ]);
    expect(events.find((e) => e.kind === 'OUTPUT_RECEIVED')?.payload).toEqual({
      attempt: 1,
      stream: 'stdout',
      bytes: 'partial\n'.length,
    });
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({ outcome: 'unknown', result_id: null });
  });

  it('exec received, then the channel closes with no reply to it: REMOTE_RESULT_INCOMPLETE / unknown, never rejected, and the lane stays blocked', async () => {
    const s = await server('close_without_exec_reply');
    const { envelope, output } = await h.run(configFor(s), { host: 'lab', command: 'deploy --now' });
    // The server got the command (it may have run it), then closed the channel without CHANNEL_SUCCESS/FAILURE.
    expect(s.log.map((e) => e.event)).toEqual(['session_opened', 'exec_received', 'channel_closed']);
    expect(s.log[1]?.command).toBe('deploy --now');
    expectDispatchDurableBeforeExec(s);
    expect(envelope.error).toMatchObject({
      code: 'REMOTE_RESULT_INCOMPLETE',
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
    });
    expect(envelope).toMatchObject({
      effect: 'unknown_effect',
      outcome_basis: 'no_exit_status_or_remote_process_identity',
    });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: false,
      response_complete: false,
    });
    expect(output).toBeUndefined();
    expect(kinds(h.events(envelope.invocation_id))).toEqual([...dispatched, 'CHANNEL_CLOSED', 'OUTCOME_RECORDED']);
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({ outcome: 'unknown', result_id: null });

    // Unknown, so its ticket blocks lane host:lab: a later write waits and does not reach the server ...
    const later = h.run(configFor(s), { host: 'lab', command: 'deploy --again' });
    const cards = await waitForCards(
      h.queue,
      (c) => c.some((card) => card.state === 'approved_waiting'),
      'the later write approved and waiting',
    );
    const head = cards.find((c) => c.action_id === envelope.invocation_id);
    expect(head).toMatchObject({ state: 'blocked_head', target: 'host:lab' });
    expect(cards.find((c) => c.state === 'approved_waiting')).toMatchObject({ waiting_for_ticket: head?.ticket });
    expect(s.log.filter((e) => e.event === 'exec_received')).toHaveLength(1);
    // ... until a person resolves the unknown head; only then is it sent.
    await h.queue.abandon(head?.ticket ?? 0, { kind: 'person', id: 'test' }, 'checked the remote by hand');
    await later;
    expect(s.log.filter((e) => e.event === 'exec_received').map((e) => e.command)).toEqual([
      'deploy --now',
      'deploy --again',
    ]);
  });

  it('exit-status 7, then the socket is destroyed: committed / failed, output marked incomplete', async () => {
    const s = await server('exit_then_destroy');
    const { envelope, output } = await h.run(configFor(s), { host: 'lab', command: 'migrate' });
    expect(s.log.map((e) => e.event)).toEqual([
      'session_opened',
      'exec_received',
      'exec_accepted',
      'stdout_written',
      'exit_status_sent',
      'socket_destroyed',
    ]);
    expectDispatchDurableBeforeExec(s);
    expect(envelope.error).toMatchObject({ code: 'COMMAND_FAILED', outcome: 'committed', retry: 'never' });
    expect(envelope).toMatchObject({ effect: 'failed', outcome_basis: 'exit_status_received_stream_incomplete' });
    expect(envelope.evidence).toMatchObject({ exit_status: 7, response_complete: false });
    expect(output).toMatchObject({ exit_status: 7, output_complete: false });
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      ...dispatched,
      'REMOTE_RESPONSE_STARTED',
      'EXIT_STATUS',
      'OUTPUT_RECEIVED',
      'OUTPUT_RECEIVED',
      'CONNECTION_LOST',
      'RESULT_COMMITTED',
    ]);
    const stored = h.results.read(envelope.evidence.result_id ?? '');
    expect(stored?.summary).toMatchObject({ exit_status: 7, output_complete: false });
    // The recording says so too: what arrived, then the mark that the rest may be missing.
    expect(recordingEvents(envelope.invocation_id)).toEqual([
      [expect.any(Number), 'o', 'done\n'],
      [expect.any(Number), 'm', outputCut],
    ]);
  });

  it('half the output, then the socket is destroyed: REMOTE_RESULT_INCOMPLETE / unknown with the bytes counted', async () => {
    const s = await server('half_output_then_destroy');
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'backup' });
    expect(s.log.map((e) => e.event)).toEqual([
      'session_opened',
      'exec_received',
      'exec_accepted',
      'stdout_written',
      'socket_destroyed',
    ]);
    expect(envelope.error).toMatchObject({ code: 'REMOTE_RESULT_INCOMPLETE', outcome: 'unknown', retry: 'reconcile' });
    expect(envelope.outcome_basis).toBe('no_exit_status_or_remote_process_identity');
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      ...dispatched,
      'REMOTE_RESPONSE_STARTED',
      'OUTPUT_RECEIVED',
      'OUTPUT_RECEIVED',
      'CONNECTION_LOST',
      'OUTCOME_RECORDED',
    ]);
    const written = s.log.find((e) => e.event === 'stdout_written')?.bytes;
    expect(events.find((e) => e.kind === 'OUTPUT_RECEIVED')?.payload).toEqual({
      attempt: 1,
      stream: 'stdout',
      bytes: written,
    });
    // The half that arrived is kept, never passed off as the whole: the recording ends with the mark that it was cut.
    expect(recordingEvents(envelope.invocation_id)).toEqual([
      [expect.any(Number), 'o', 'first half of the output\n'],
      [expect.any(Number), 'm', outputCut],
    ]);
  });

  it('the exec request is never answered: the exec-reply deadline ends it as unknown, the broker does not hang', async () => {
    const s = await server('no_exec_reply');
    h.channel = h.newChannel({ execReplyTimeoutMs: 200 });
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'sleep-forever' });
    expect(s.log.map((e) => e.event)).toEqual(['session_opened', 'exec_received']);
    expectDispatchDurableBeforeExec(s);
    expect(envelope.error).toMatchObject({ code: 'REMOTE_RESULT_INCOMPLETE', outcome: 'unknown' });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: false,
    });
    expect(kinds(h.events(envelope.invocation_id))).toEqual([...dispatched, 'CONNECTION_LOST', 'OUTCOME_RECORDED']);
  });

  it("exec accepted, then silence past the host's operation deadline: OPERATION_TIMEOUT, effect unknown, never a caller event", async () => {
    const s = await server('silent_after_exec');
    const config = sshHostsConfig([
      {
        port: s.port,
        user: 'agent',
        credential: 'lab-key',
        hostKey: [s.hostKeyFingerprint],
        extra: '    approval: none\n    timeout_ms: 300',
      },
    ]);
    const { envelope } = await h.run(config, { host: 'lab', command: 'long-job' });
    expect(s.log.map((e) => e.event)).toEqual(['session_opened', 'exec_received', 'exec_accepted']);
    expect(envelope.error).toMatchObject({
      code: 'OPERATION_TIMEOUT',
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
    });
    expect(envelope).toMatchObject({
      caller_disposition: 'completed',
      effect: 'unknown_effect',
      outcome_basis: 'operation_deadline_after_transport_write_no_remote_receipt',
    });
    expect(kinds(h.events(envelope.invocation_id))).toEqual([
      ...dispatched,
      'REMOTE_RESPONSE_STARTED',
      'OUTPUT_RECEIVED',
      'OUTPUT_RECEIVED',
      'OUTCOME_RECORDED',
    ]);
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      caller_disposition: null,
      outcome: 'unknown',
      code: 'OPERATION_TIMEOUT',
    });
  });

  it('the caller cancels after exec was accepted: canceled, effect unknown (a caller event only)', async () => {
    const s = await server('silent_after_exec');
    const cancel = new AbortController();
    void s.waitFor('exec_accepted').then(() => cancel.abort());
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'long-job' }, cancel.signal);
    expect(envelope.error).toMatchObject({ code: 'CALLER_CANCELLED', outcome: 'unknown' });
    expect(envelope).toMatchObject({ caller_disposition: 'canceled', effect: 'unknown_effect' });
    expect(kinds(h.events(envelope.invocation_id))).toContain('CALLER_CANCELLED');
  });
});

describe('when the journal is slow to make DISPATCH_STARTED durable', () => {
  it('the exec request still reaches the server only after the row is visible to another connection', async () => {
    const s = await server('exit_0');
    // Holds each DISPATCH_STARTED back for a loopback round trip (a fresh TCP connection to the
    // server and its SSH banner): a channel that wrote exec without awaiting the gate would be seen.
    const slowGate: DispatchGate = {
      append: (event) => h.temp.journal.append(event),
      beginDispatch: async (actionId, attempt, connection) => {
        await bannerRoundTrip(s.port);
        return h.temp.journal.beginDispatch(actionId, attempt, connection);
      },
    };
    h.channel = h.newChannel({}, slowGate);
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'true' });
    expect(envelope.error).toBeUndefined();
    expectDispatchDurableBeforeExec(s);
  });
});

function bannerRoundTrip(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('data', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

describe('when the server refuses', () => {
  it('the session channel: connection_setup / not_attempted at stage session_channel, nothing dispatched', async () => {
    const s = await server('refuse_session');
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'deploy' });
    expect(s.log.map((e) => e.event)).toEqual(['session_refused']);
    expect(envelope.error).toMatchObject({
      code: 'SSH_CHANNEL_FAILED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(envelope).toMatchObject({ effect: 'no_effect', outcome_basis: 'connection_setup_failed_before_dispatch' });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: false,
      dispatch_evidence: 'never_started',
      peer_identity: s.hostKeyFingerprint,
    });
    expect(envelope.evidence.attempts).toEqual([
      { n: 1, stage: 'session_channel', outcome: 'not_attempted', code: 'SSH_CHANNEL_FAILED' },
    ]);
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CREDENTIAL_AUTHORIZED',
      'SETUP_ATTEMPT_FAILED',
      'OUTCOME_RECORDED',
    ]);
    expect(events[3]?.payload).toEqual({ attempt: 1, stage: 'session_channel', detail: 'open_refused' });
  });

  it('the exec request (CHANNEL_FAILURE): rejected, with a result row before RESULT_COMMITTED', async () => {
    const s = await server('refuse_exec');
    const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'forbidden' });
    expect(s.log.map((e) => e.event)).toEqual(['session_opened', 'exec_received', 'exec_refused']);
    expectDispatchDurableBeforeExec(s);
    expect(envelope.error).toMatchObject({
      code: 'REMOTE_REJECTED',
      phase: 'remote_execution',
      outcome: 'rejected',
      retry: 'after_correction',
    });
    expect(envelope).toMatchObject({ effect: 'rejected', outcome_basis: 'exec_refused_by_server' });
    expect(kinds(h.events(envelope.invocation_id))).toEqual([...dispatched, 'RESULT_COMMITTED']);
    expect(h.results.read(envelope.evidence.result_id ?? '')?.summary).toMatchObject({ exec_reply: 'failure' });
    // A refused exec request ran nothing: no output, and none of it can be missing.
    expect(recordingEvents(envelope.invocation_id)).toEqual([]);
  });

  it('nothing is wrong: exit 0 with output is committed / succeeded', async () => {
    const s = await server('exit_0');
    const { envelope, output } = await h.run(configFor(s), { host: 'lab', command: 'true' });
    expect(envelope.error).toBeUndefined();
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'exit_status_and_channel_close' });
    expect(output?.stdout.toString()).toBe('hello\n');
    expect(s.log.find((e) => e.event === 'exec_received')?.command).toBe('true');
    expect(recordingEvents(envelope.invocation_id)).toEqual([[expect.any(Number), 'o', 'hello\n']]);
  });
});

/** A real wrong key is SSH_AUTH_FAILED: execute-ssh-action.test.ts, against OpenSSH. */
describe('when the connection fails during user auth, with no key refused', () => {
  it.for([
    ['ends the connection (FIN) during user auth', 'fin_during_auth', 'socket_ended'],
    ['never answers user auth, past its deadline', 'stall_auth', 'auth_unanswered'],
  ] as const)(
    'the server %s: SSH_TRANSPORT_FAILED at user_auth, not_attempted, never SSH_AUTH_FAILED',
    async ([, behavior, seen]) => {
      const s = await server(behavior);
      h.channel = h.newChannel({ authTimeoutMs: 300 });
      const { envelope } = await h.run(configFor(s), { host: 'lab', command: 'deploy' });
      expect(s.log.map((e) => e.event)).toEqual([seen]);
      expect(envelope.error).toMatchObject({
        code: 'SSH_TRANSPORT_FAILED',
        phase: 'connection_setup',
        outcome: 'not_attempted',
        retry: 'backoff',
      });
      expect(envelope).toMatchObject({ effect: 'no_effect', outcome_basis: 'connection_setup_failed_before_dispatch' });
      expect(envelope.evidence).toMatchObject({ dispatch_started: false, dispatch_evidence: 'never_started' });
      expect(envelope.evidence.attempts).toEqual([
        { n: 1, stage: 'user_auth', outcome: 'not_attempted', code: 'SSH_TRANSPORT_FAILED' },
      ]);
      expect(kinds(h.events(envelope.invocation_id))).toEqual([
        'ACTION_ACCEPTED',
        'PREFLIGHT_VALIDATED',
        'CREDENTIAL_AUTHORIZED',
        'SETUP_ATTEMPT_FAILED',
        'OUTCOME_RECORDED',
      ]);
    },
  );
});

/**
 * The advice each setup failure answers, against real sockets on 127.0.0.1. Nothing crossed the boundary, and the
 * channel never retries setup itself: a transient failure says backoff (the same call may succeed later, as the
 * HTTP channel says while it has attempts left), one that waiting cannot fix says after_correction. OpenSSH's own
 * refusals (a wrong key, a host key not trusted, a name that does not exist): execute-ssh-action.test.ts.
 */
describe('when setup fails before the session channel, the retry advice says whether waiting can help', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  /** A TCP server that does what `onSocket` says with each connection (the test closes it). */
  async function rawServer(onSocket: (socket: Socket) => void): Promise<number> {
    const sockets = new Set<Socket>();
    const raw: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      onSocket(socket);
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
      raw.close();
    });
    const address = raw.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return address.port;
  }

  /**
   * A port whose listener never completes another TCP handshake: its process (started here) is stopped and its accept
   * queue full, so the kernel drops every further SYN and a connect waits until the channel's own deadline.
   */
  async function unansweredPort(): Promise<number> {
    const child: ChildProcess = spawn(
      process.execPath,
      [
        '-e',
        "const s = require('node:net').createServer(); s.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => console.log(s.address().port));",
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const held: Socket[] = [];
    // A stopped process outlives a worker that ends before afterEach runs: the worker's exit kills it too.
    const killChild = (): void => void child.kill('SIGKILL');
    process.once('exit', killChild);
    cleanups.push(() => {
      for (const socket of held) socket.destroy();
      child.kill('SIGKILL');
      process.off('exit', killChild);
    });
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout?.once('data', (data: Buffer) => resolve(Number(data.toString().trim())));
      child.once('exit', () => reject(new Error('the listener exited')));
    });
    child.kill('SIGSTOP');
    // Fill the accept queue: connects complete until it is full, then one waits (never answered).
    for (let i = 0; i < 64; i++) {
      const socket = connect({ host: '127.0.0.1', port });
      held.push(socket);
      const answered = await new Promise<boolean>((resolve) => {
        // After the timer, one more turn of the loop: a connect that completed while this process was not scheduled
        // is heard (poll phase) before the check phase's setImmediate says it went unanswered.
        const timer = setTimeout(() => setImmediate(() => resolve(false)), 300);
        socket.once('connect', () => {
          clearTimeout(timer);
          resolve(true);
        });
        socket.once('error', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (!answered) return port;
    }
    throw new Error('the stopped listener kept accepting connections');
  }

  it.for([
    [
      'a TCP connect nobody answers, past connectTimeoutMs',
      'CONNECT_TIMEOUT',
      'tcp_connect',
      'backoff',
      'timeout',
      async () => configAt(await unansweredPort()),
    ],
    [
      'a server that accepts TCP and never sends its SSH identification, past handshakeTimeoutMs',
      'SSH_TRANSPORT_FAILED',
      'ssh_transport',
      'backoff',
      'handshake_timeout',
      async () => configAt(await rawServer(() => undefined)),
    ],
    [
      'a server that answers with no SSH identification and closes the connection',
      'SSH_TRANSPORT_FAILED',
      'ssh_transport',
      'backoff',
      'handshake_failed',
      async () => configAt(await rawServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'))),
    ],
    [
      'a server that rejects every key',
      'SSH_AUTH_FAILED',
      'user_auth',
      'after_correction',
      'all_methods_failed',
      async () => configFor(await server('reject_auth')),
    ],
    [
      'a host key that is not the pinned one',
      'SSH_HOST_KEY_REJECTED',
      'host_key_verified',
      'after_correction',
      undefined,
      async () => {
        const s = await server('exit_0');
        return sshHostsConfig([
          { port: s.port, user: 'agent', credential: 'lab-key', hostKey: [`SHA256:${'A'.repeat(43)}`] },
        ]);
      },
    ],
  ] as const)('%s: %s at %s, not_attempted, retry %s', async ([, code, stage, retry, detail, config]) => {
    h.channel = h.newChannel({ connectTimeoutMs: 300, handshakeTimeoutMs: 300 });
    const { envelope } = await h.run(await config(), { host: 'lab', command: 'deploy' });
    expect(envelope.error).toMatchObject({ code, phase: 'connection_setup', outcome: 'not_attempted', retry });
    expect(envelope).toMatchObject({ effect: 'no_effect', outcome_basis: 'connection_setup_failed_before_dispatch' });
    expect(envelope.evidence).toMatchObject({ dispatch_started: false, dispatch_evidence: 'never_started' });
    expect(envelope.evidence.attempts).toEqual([{ n: 1, stage, outcome: 'not_attempted', code }]);
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CREDENTIAL_AUTHORIZED',
      'SETUP_ATTEMPT_FAILED',
      'OUTCOME_RECORDED',
    ]);
    if (detail !== undefined) expect(events[3]?.payload).toEqual({ attempt: 1, stage, detail });
  });
});

function configAt(port: number) {
  return sshHostsConfig([{ port, user: 'agent', credential: 'lab-key', hostKey: 'accept_new' }]);
}
