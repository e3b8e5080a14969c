import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import diagnosticsChannel from 'node:diagnostics_channel';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent, NewEvent } from '../../contract/index.js';
import type { DispatchGate } from '../../ports/index.js';
import { classifyOutcome, sshReportEvidence } from '../../core/index.js';
import { sshExitObservations } from '../../testing/action-paths.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { createMemoryVault, type MemoryVault } from '../../testing/memory-vault.js';
import { MisbehavingSshServer, type SshBehavior } from '../../testing/misbehaving-ssh-server.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { freePort, generateKey } from '../../testing/test-sshd.js';
import { tcpSetupFailure } from './ssh-channel.js';
import { SshChannel, type HostKeyPolicy, type SshChannelReport, type SshLimits, type SshWireRequest } from './index.js';

type Connection = Parameters<DispatchGate['beginDispatch']>[2];

/**
 * The dispatch port, in memory, so the channel runs alone (no executor, no journal rules). Every call lands on
 * one timeline; `hold` runs inside beginDispatch, before it resolves, i.e. while the exec request must still be
 * held back; `refuse` makes DISPATCH_STARTED fail as an unwritable journal would.
 */
class RecordingGate implements DispatchGate {
  readonly timeline: string[] = [];
  readonly appended: NewEvent[] = [];
  readonly dispatches: Connection[] = [];

  constructor(
    private readonly hold: () => Promise<void> = () => Promise.resolve(),
    private readonly refuse = false,
  ) {}

  async beginDispatch(actionId: string, attempt: number, connection: Connection): Promise<{ event: JournalEvent }> {
    this.timeline.push('DISPATCH_STARTED');
    this.dispatches.push(connection);
    await this.hold();
    if (this.refuse) throw new Error('journal not writable');
    // The channel never reads the durable row back; a stamped stand-in is enough.
    return { event: { kind: 'DISPATCH_STARTED', action_id: actionId, attempt } as unknown as JournalEvent };
  }

  append(event: NewEvent): Promise<{ event: JournalEvent }> {
    this.timeline.push(event.kind);
    this.appended.push(event);
    return Promise.resolve({ event: event as JournalEvent });
  }
}

/** A gate that holds observations as the journal's appendLater does: they settle only once commitHeld is called. */
class HoldingGate extends RecordingGate {
  private readonly held: Array<() => void> = [];

  appendLater(event: NewEvent): Promise<{ event: JournalEvent }> {
    this.timeline.push(`held ${event.kind}`);
    this.appended.push(event);
    return new Promise((resolve) => this.held.push(() => resolve({ event: event as JournalEvent })));
  }

  commitHeld(): void {
    this.timeline.push('commitHeld');
    for (const settle of this.held.splice(0)) settle();
  }
}

let keyDir: TempDir;
let privateKey: Buffer;
let dataDir: TempDir;
let vault: MemoryVault;
const servers: MisbehavingSshServer[] = [];

beforeAll(async () => {
  keyDir = createTempDir('postern-ssh-channel-keys-');
  privateKey = generateKey(keyDir.path, 'agent', 'ssh-channel-test-key').privateKey;
  vault = await createMemoryVault();
});
afterEach(async () => {
  dataDir.remove();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(() => keyDir.remove());

async function server(
  behavior: SshBehavior,
  options: Parameters<typeof MisbehavingSshServer.start>[1] = {},
): Promise<MisbehavingSshServer> {
  const s = await MisbehavingSshServer.start(behavior, options);
  servers.push(s);
  return s;
}

function channel(gate: DispatchGate, limits: Partial<SshLimits> = {}): SshChannel {
  dataDir = createTempDir('postern-ssh-channel-data-');
  return new SshChannel({ gate, clock: new FakeClock(), knownHostsDir: dataDir.path, vault, limits });
}

function request(port: number, hostKey: HostKeyPolicy, extra: Partial<SshWireRequest> = {}): SshWireRequest {
  return {
    actionId: 'act_ssh_channel_test',
    host: { name: 'lab', host: '127.0.0.1', port, user: 'agent', hostKey },
    privateKey,
    command: 'deploy --now',
    timeoutMs: 20_000,
    outputBytesMax: 1024,
    beforeDispatch: new AbortController().signal,
    ...extra,
  };
}

const pinned = (s: MisbehavingSshServer): HostKeyPolicy => ({ pinned: [s.hostKeyFingerprint] });
const events = (s: MisbehavingSshServer): string[] => s.log.map((e) => e.event);

/**
 * A round trip through the server's event loop on a fresh connection (its SSH banner). An exec request written
 * before this call reaches the server first, so a server that has not logged it by then never got it.
 */
function serverRoundTrip(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('data', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

/** The fields every report before the boundary shares: nothing handed over, nothing seen back. */
function expectNotDispatched(report: SshChannelReport, gate: RecordingGate): void {
  expect(report).toMatchObject({
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    channelClosed: false,
    eof: false,
    outputComplete: false,
  });
  expect(report.output.stdoutBytes + report.output.stderrBytes).toBe(0);
  expect(gate.dispatches).toEqual([]);
}

describe('when setup fails before the session channel exists', () => {
  it('a refused TCP connect is SETUP_ATTEMPT_FAILED at tcp_connect and nothing is dispatched', async () => {
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(await freePort(), { pinned: ['SHA256:unused'] }));
    expectNotDispatched(report, gate);
    expect(report.setup).toEqual({ failure: 'connect_refused', stage: 'tcp_connect', attempts: 1, attemptsMax: 1 });
    expect(report.stages).toEqual(['dns', 'tcp_connect']);
    expect(report.attempts).toEqual([
      { n: 1, stage: 'tcp_connect', dispatched: false, failure: 'connect_refused', detail: 'ECONNREFUSED' },
    ]);
    expect(gate.appended).toEqual([
      {
        kind: 'SETUP_ATTEMPT_FAILED',
        action_id: 'act_ssh_channel_test',
        payload: { attempt: 1, stage: 'tcp_connect', detail: 'ECONNREFUSED' },
      },
    ]);
  });

  it.each([
    ['ECONNREFUSED', 'connect_refused'],
    ['ECONNRESET', 'connect_refused'],
    ['ETIMEDOUT', 'connect_timeout'],
    ['ENETUNREACH', 'network_unreachable'],
    ['EHOSTUNREACH', 'network_unreachable'],
  ] as const)('a TCP connect failing with %s is %s, as the HTTP channel maps it', (code, failure) => {
    expect(tcpSetupFailure(code)).toBe(failure);
  });

  it('a host key that is not the pinned one stops at host_key_verified, before auth and any session', async () => {
    const s = await server('exit_0');
    const gate = new RecordingGate();
    const wrongPin = `SHA256:${'A'.repeat(43)}`;
    const report = await channel(gate).perform(request(s.port, { pinned: [wrongPin] }));
    expectNotDispatched(report, gate);
    expect(report.setup).toMatchObject({ failure: 'ssh_host_key', stage: 'host_key_verified' });
    expect(report.hostKey).toEqual({ fingerprint: s.hostKeyFingerprint, trust: 'pinned' });
    expect(report.stages).not.toContain('user_auth');
    expect(report.attempts[0]?.detail).toContain(s.hostKeyFingerprint);
    expect(events(s)).toEqual([]);
    expect(gate.timeline).toEqual(['SETUP_ATTEMPT_FAILED']);
  });

  it('a server that rejects every key stops at user_auth with the host key already verified', async () => {
    const s = await server('reject_auth');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expectNotDispatched(report, gate);
    expect(report.setup).toMatchObject({ failure: 'ssh_auth', stage: 'user_auth' });
    expect(report.stages).toEqual(['dns', 'tcp_connect', 'ssh_transport', 'host_key_verified', 'user_auth']);
    expect(report.hostKey).toEqual({ fingerprint: s.hostKeyFingerprint, trust: 'pinned' });
    expect(events(s)).toEqual([]);
  });

  it.for([
    ['ends the connection (FIN) at the first auth request', 'fin_during_auth', 'socket_ended', 'connection_closed'],
    ['never answers auth, past authTimeoutMs', 'stall_auth', 'auth_unanswered', 'auth_timeout'],
  ] as const)(
    'a server that %s: a transport failure at user_auth, never a refused key',
    async ([, behavior, seen, detail]) => {
      const s = await server(behavior);
      const gate = new RecordingGate();
      const report = await channel(gate, { authTimeoutMs: 300 }).perform(request(s.port, pinned(s)));
      expectNotDispatched(report, gate);
      expect(events(s)).toEqual([seen]);
      expect(report.setup).toEqual({ failure: 'ssh_transport', stage: 'user_auth', attempts: 1, attemptsMax: 1 });
      expect(report.attempts).toEqual([
        { n: 1, stage: 'user_auth', dispatched: false, failure: 'ssh_transport', detail },
      ]);
      expect(report.hostKey).toEqual({ fingerprint: s.hostKeyFingerprint, trust: 'pinned' });
    },
  );

  it('a refused session channel is a setup failure at session_channel: the exec request never leaves', async () => {
    const s = await server('refuse_session');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expectNotDispatched(report, gate);
    expect(report.setup).toMatchObject({ failure: 'ssh_channel_refused', stage: 'session_channel' });
    expect(events(s)).toEqual(['session_refused']);
  });
});

describe('when the dispatch gate sits between the open channel and the exec request', () => {
  it('the exec request reaches the server only after beginDispatch resolved, with the verified host key', async () => {
    const s = await server('exit_0');
    let seenDuringGate: string[] | undefined;
    const gate = new RecordingGate(async () => {
      await serverRoundTrip(s.port);
      seenDuringGate = events(s);
    });
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(seenDuringGate).toEqual(['session_opened']);
    expect(events(s)).toEqual([
      'session_opened',
      'exec_received',
      'exec_accepted',
      'stdout_written',
      'exit_status_sent',
      'channel_closed',
    ]);
    expect(s.log.find((e) => e.event === 'exec_received')?.command).toBe('deploy --now');
    expect(gate.dispatches).toEqual([
      {
        connection: 'fresh',
        connection_id: report.connectionId,
        peer_identity: s.hostKeyFingerprint,
        peer_trust: 'pinned',
      },
    ]);
    expect(gate.timeline).toEqual(['DISPATCH_STARTED', ...sshExitObservations]);
    expect(report).toMatchObject({
      dispatchStarted: true,
      handedToTransport: true,
      requestComplete: true,
      execReply: 'success',
      exitStatus: 0,
      eof: true,
      channelClosed: true,
      transportBroken: false,
      outputComplete: true,
    });
    expect(report.stages).toEqual([
      'dns',
      'tcp_connect',
      'ssh_transport',
      'host_key_verified',
      'user_auth',
      'session_channel',
      'exec_requested',
      'exec_accepted',
      'exit_status',
      'eof',
      'channel_close',
    ]);
    expect(report.output.stdout.toString()).toBe('hello\n');
    expect(report.attempts).toEqual([
      { n: 1, stage: 'dispatch_started', dispatched: true, connection_id: report.connectionId },
    ]);
  });

  it('holds its observations for one commit and commits them once the exchange ended, before it reports', async () => {
    const s = await server('exit_0');
    const gate = new HoldingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(report).toMatchObject({ dispatchStarted: true, exitStatus: 0, channelClosed: true, outputComplete: true });
    expect(gate.timeline).toEqual([
      'DISPATCH_STARTED',
      ...sshExitObservations.map((kind) => `held ${kind}`),
      'commitHeld',
    ]);
  });

  it('asked to, hands its observations over held instead: the settlement appended withHeld commits them', async () => {
    const s = await server('exit_0');
    const gate = new HoldingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s), { observationsRideWithSettlement: true }));
    expect(report).toMatchObject({ dispatchStarted: true, exitStatus: 0, channelClosed: true });
    expect(gate.timeline).not.toContain('commitHeld');
    expect(gate.timeline.filter((entry) => entry.startsWith('held '))).toEqual(
      sshExitObservations.map((kind) => `held ${kind}`),
    );
    expect(await report.observations?.settled()).toBeUndefined();
    expect(gate.timeline.at(-1)).toBe('commitHeld');
  });

  it('asked to, but the caller cancelled: commits its observations itself (the record appends a caller event first)', async () => {
    const s = await server('silent_after_exec');
    const gate = new HoldingGate();
    const cancel = new AbortController();
    void s.waitFor('exec_accepted').then(() => cancel.abort());
    const report = await channel(gate).perform(
      request(s.port, pinned(s), { observationsRideWithSettlement: true, cancel: cancel.signal }),
    );
    expect(report).toMatchObject({ dispatchStarted: true, caller: 'cancelled' });
    expect(report.observations).toBeUndefined();
    expect(gate.timeline.at(-1)).toBe('commitHeld');
  });

  it.each([
    ['a cancel', 'cancel', { caller: 'cancelled' }, 'cancellation_after_dispatch_started'],
    ['a vault lock', 'beforeDispatch', { vaultLocked: true }, 'vault_locked_after_dispatch_started'],
  ] as const)(
    '%s while DISPATCH_STARTED is being made durable: the exec request is never written, the report says so',
    async (_what, signal, says, basis) => {
      const s = await server('exit_0');
      const stop = new AbortController();
      const gate = new RecordingGate(async () => {
        stop.abort();
        await serverRoundTrip(s.port);
      });
      const report = await channel(gate).perform(request(s.port, pinned(s), { [signal]: stop.signal }));
      await serverRoundTrip(s.port);
      expect(events(s)).toEqual(['session_opened']);
      expect(gate.timeline).toEqual(['DISPATCH_STARTED']);
      expect(report).toMatchObject({
        dispatchStarted: true,
        handedToTransport: false,
        requestComplete: false,
        ...says,
        channelClosed: false,
        transportBroken: false,
      });
      expect(report.stages).not.toContain('exec_requested');
      expect(report.execAtMs).toBeUndefined();
      expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({ outcome: 'unknown', outcome_basis: basis });
    },
  );

  it('a DISPATCH_STARTED that cannot be made durable sends nothing: the open channel is dropped unused', async () => {
    const s = await server('exit_0');
    const gate = new RecordingGate(() => Promise.resolve(), true);
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    await serverRoundTrip(s.port);
    expect(report.journalFailed).toBeInstanceOf(Error);
    expect(report).toMatchObject({ dispatchStarted: false, handedToTransport: false, requestComplete: false });
    expect(gate.timeline).toEqual(['DISPATCH_STARTED']);
    expect(events(s)).toEqual(['session_opened']);
  });
});

describe('when the session channel ends while DISPATCH_STARTED is being made durable', () => {
  it('the server closes the channel (CHANNEL_CLOSE): the exec request is never written, and the outcome is unknown (the row is durable)', async () => {
    const s = await server('end_session_when_told');
    const gate = new RecordingGate(() => s.endSession('channel_close'));
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    await serverRoundTrip(s.port);
    expect(events(s)).toEqual(['session_opened', 'channel_closed']);
    expect(gate.timeline).toEqual(['DISPATCH_STARTED', 'CHANNEL_CLOSED']);
    expect(report).toMatchObject({
      dispatchStarted: true,
      handedToTransport: false,
      requestComplete: false,
      channelClosed: true,
      transportBroken: false,
      outputComplete: false,
    });
    expect(report.execReply).toBeUndefined();
    expect(report.stages).not.toContain('exec_requested');
    expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({
      phase: 'remote_execution',
      outcome: 'unknown',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      retry: 'reconcile',
      outcome_basis: 'channel_ended_after_dispatch_started_exec_not_sent',
    });
  });
});

describe('when the connection ends while DISPATCH_STARTED is being made durable', () => {
  /** Client TCP sockets as Node creates them (diagnostics_channel), so a test can wait for the channel's to close. */
  function clientSockets(): { sockets: Socket[]; stop: () => void } {
    const sockets: Socket[] = [];
    const onSocket = (message: unknown): void => {
      sockets.push((message as { socket: Socket }).socket);
    };
    diagnosticsChannel.subscribe('net.client.socket', onSocket);
    return { sockets, stop: () => diagnosticsChannel.unsubscribe('net.client.socket', onSocket) };
  }

  it('the exec request is never written: CONNECTION_LOST, no REQUEST_SENT, the outcome is unknown', async () => {
    const s = await server('end_session_when_told');
    const created = clientSockets();
    try {
      const gate = new RecordingGate(async () => {
        // The channel's own socket is the first one created since subscribing.
        const socket = created.sockets[0];
        if (socket === undefined) throw new Error('no client socket seen');
        const closed = new Promise((resolve) => socket.once('close', resolve));
        s.dropConnections();
        // ssh2 emits its client's close from inside the socket's close, before this listener: the channel saw it.
        await closed;
      });
      const report = await channel(gate).perform(request(s.port, pinned(s)));
      expect(events(s)).toEqual(['session_opened', 'socket_destroyed']);
      expect(gate.timeline).toEqual(['DISPATCH_STARTED', 'CONNECTION_LOST']);
      expect(report).toMatchObject({
        dispatchStarted: true,
        handedToTransport: false,
        requestComplete: false,
        channelClosed: false,
        transportBroken: true,
      });
      expect(report.stages).not.toContain('exec_requested');
      expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({
        phase: 'remote_execution',
        outcome: 'unknown',
        code: 'REMOTE_OUTCOME_UNKNOWN',
        retry: 'reconcile',
        outcome_basis: 'channel_ended_after_dispatch_started_exec_not_sent',
      });
    } finally {
      created.stop();
    }
  });
});

describe('when the server answers an exec request that was never written (a rogue CHANNEL_SUCCESS / CHANNEL_FAILURE)', () => {
  it.for([
    ['CHANNEL_SUCCESS', 'channel_success', 'success'],
    ['CHANNEL_FAILURE', 'channel_failure', 'failure'],
  ] as const)(
    'a %s while DISPATCH_STARTED is being made durable: never read as an exec reply nor as a channel end; the exec request is never written',
    async ([, how, reply]) => {
      const s = await server('end_session_when_told');
      const gate = new RecordingGate(() => s.endSession(how));
      const report = await channel(gate).perform(request(s.port, pinned(s)));
      await serverRoundTrip(s.port);
      expect(events(s)).toEqual(['session_opened', `${how}_sent`]);
      // No REMOTE_RESPONSE_STARTED (nothing was accepted) and no CHANNEL_CLOSED (nothing closed).
      expect(gate.timeline).toEqual(['DISPATCH_STARTED']);
      expect(report).toMatchObject({
        dispatchStarted: true,
        handedToTransport: false,
        requestComplete: false,
        channelClosed: false,
        transportBroken: false,
        unsolicitedReply: reply,
      });
      expect(report.execReply).toBeUndefined();
      expect(report.stages).not.toContain('exec_requested');
      expect(report.stages).not.toContain('exec_accepted');
      expect(report.stages).not.toContain('channel_close');
      expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({
        phase: 'remote_execution',
        outcome: 'unknown',
        code: 'REMOTE_OUTCOME_UNKNOWN',
        retry: 'reconcile',
        outcome_basis: 'unsolicited_reply_after_dispatch_started_exec_not_sent',
      });
    },
  );
});

describe('when the server packs something behind the session channel’s confirmation, in the same TCP read (before beginDispatch is asked)', () => {
  it('a CHANNEL_CLOSE: the channel opened and ended, a setup failure at session_channel, nothing dispatched or sent', async () => {
    const s = await server('close_at_open');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    await serverRoundTrip(s.port);
    expectNotDispatched(report, gate);
    // Not open_refused: the server did confirm the channel.
    expect(report.setup).toEqual({ failure: 'ssh_channel', stage: 'session_channel', attempts: 1, attemptsMax: 1 });
    expect(report.attempts).toEqual([
      {
        n: 1,
        stage: 'session_channel',
        dispatched: false,
        failure: 'ssh_channel',
        detail: 'channel_closed_before_exec',
      },
    ]);
    expect(gate.timeline).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(events(s)).toEqual(['session_opened', 'channel_closed']);
    expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({
      phase: 'connection_setup',
      outcome: 'not_attempted',
      code: 'SSH_CHANNEL_FAILED',
      retry: 'backoff',
    });
  });

  it.for([
    ['CHANNEL_SUCCESS', 'success_at_open', 'channel_success'],
    ['CHANNEL_FAILURE', 'failure_at_open', 'channel_failure'],
  ] as const)(
    'a %s no request asked for: the server broke the protocol, a setup failure (not a channel end), nothing sent',
    async ([, behavior, how]) => {
      const s = await server(behavior);
      const gate = new RecordingGate();
      const report = await channel(gate).perform(request(s.port, pinned(s)));
      await serverRoundTrip(s.port);
      expectNotDispatched(report, gate);
      expect(report.setup).toEqual({
        failure: 'ssh_channel_protocol',
        stage: 'session_channel',
        attempts: 1,
        attemptsMax: 1,
      });
      expect(report.attempts[0]?.detail).toBe(`unsolicited_${how}_before_exec`);
      // Nothing of an exec reply is recorded, and certainly not before DISPATCH_STARTED.
      expect(gate.timeline).toEqual(['SETUP_ATTEMPT_FAILED']);
      expect(report.stages).not.toContain('exec_accepted');
      expect(events(s)).toEqual(['session_opened', `${how}_sent`]);
      expect(classifyOutcome(sshReportEvidence(report))).toMatchObject({
        phase: 'connection_setup',
        outcome: 'not_attempted',
        code: 'SSH_CHANNEL_FAILED',
        retry: 'after_correction',
      });
    },
  );
});

describe('after dispatch the report says what came back, and nothing more', () => {
  const payloads = (gate: RecordingGate, kind: string): unknown[] =>
    gate.appended.filter((e) => e.kind === kind).map((e) => e.payload);

  it('the connection drops after half the output: request sent, no exit, transport broken', async () => {
    const s = await server('half_output_then_destroy');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(events(s)).toEqual([
      'session_opened',
      'exec_received',
      'exec_accepted',
      'stdout_written',
      'socket_destroyed',
    ]);
    expect(report).toMatchObject({
      dispatchStarted: true,
      requestComplete: true,
      execReply: 'success',
      transportBroken: true,
      channelClosed: false,
      outputComplete: false,
      // ssh2 ends the stream itself when the connection dies: that is no CHANNEL_EOF from the server.
      eof: false,
    });
    expect(report.stages).not.toContain('eof');
    expect(report.exitStatus).toBeUndefined();
    expect(report.exitSignal).toBeUndefined();
    expect(report.output.stdout.toString()).toBe('first half of the output\n');
    expect(gate.timeline).toEqual([
      'DISPATCH_STARTED',
      'REQUEST_SENT',
      'REMOTE_RESPONSE_STARTED',
      'OUTPUT_RECEIVED',
      'OUTPUT_RECEIVED',
      'CONNECTION_LOST',
    ]);
  });

  it('no reply to the exec request within execReplyTimeoutMs: request sent, no reply, transport broken', async () => {
    const s = await server('no_exec_reply');
    const gate = new RecordingGate();
    const report = await channel(gate, { execReplyTimeoutMs: 300 }).perform(request(s.port, pinned(s)));
    expect(events(s)).toEqual(['session_opened', 'exec_received']);
    expect(report).toMatchObject({ dispatchStarted: true, requestComplete: true, transportBroken: true });
    expect(report.execReply).toBeUndefined();
    expect(report.exitStatus).toBeUndefined();
    expect(gate.timeline).toEqual(['DISPATCH_STARTED', 'REQUEST_SENT', 'CONNECTION_LOST']);
  });

  it('a refused exec request is execReply failure after dispatch, not a setup failure', async () => {
    const s = await server('refuse_exec');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(report).toMatchObject({ dispatchStarted: true, requestComplete: true, execReply: 'failure' });
    expect(report.setup).toBeUndefined();
    expect(report.exitStatus).toBeUndefined();
    expect(gate.timeline).toEqual(['DISPATCH_STARTED', 'REQUEST_SENT']);
  });

  it('the channel closes with the exec request unanswered: channel closed, no exec reply, never a refusal', async () => {
    const s = await server('close_without_exec_reply');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    // The server got the command (it may have run it) and then closed the channel.
    expect(events(s)).toEqual(['session_opened', 'exec_received', 'channel_closed']);
    expect(s.log[1]?.command).toBe('deploy --now');
    expect(report).toMatchObject({
      dispatchStarted: true,
      requestComplete: true,
      channelClosed: true,
      transportBroken: false,
      outputComplete: false,
    });
    expect(report.execReply).toBeUndefined();
    expect(report.exitStatus).toBeUndefined();
    expect(gate.timeline).toEqual(['DISPATCH_STARTED', 'REQUEST_SENT', 'CHANNEL_CLOSED']);
  });

  it('exit-status 7 then a destroyed socket: the status stands, the output is marked incomplete', async () => {
    const s = await server('exit_then_destroy');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(report).toMatchObject({
      exitStatus: 7,
      transportBroken: true,
      channelClosed: false,
      outputComplete: false,
      eof: false,
    });
    expect(payloads(gate, 'EXIT_STATUS')).toEqual([{ attempt: 1, exit_status: 7 }]);
    expect(gate.timeline).toContain('CONNECTION_LOST');
  });

  it('an exit signal is reported as the signal, with no exit status', async () => {
    const s = await server('exit_signal_kill');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s)));
    expect(report).toMatchObject({ exitSignal: 'SIGKILL', channelClosed: true, transportBroken: false });
    expect(report.exitStatus).toBeUndefined();
    expect(report.stages).toContain('exit_signal');
    expect(payloads(gate, 'EXIT_SIGNAL')).toEqual([{ attempt: 1, signal: 'SIGKILL' }]);
    expect(payloads(gate, 'EXIT_STATUS')).toEqual([]);
  });
});

describe('when output passes outputBytesMax', () => {
  const out = Buffer.from('out-bytes\n');
  const err = Buffer.from('err-bytes\n');
  const sha = (b: Buffer): Buffer => createHash('sha256').update(b).digest();
  const digest = `sha256:${createHash('sha256').update(sha(out)).update(sha(err)).digest('hex')}`;

  it('keeps stdout first then stderr up to the cap, counts and hashes every byte, and marks it truncated', async () => {
    const s = await server('stdout_stderr_exit_3');
    const gate = new RecordingGate();
    const report = await channel(gate).perform(request(s.port, pinned(s), { outputBytesMax: 12 }));
    expect(report.exitStatus).toBe(3);
    expect(report.output).toEqual({
      stdout: out,
      stderr: Buffer.from('er'),
      stdoutBytes: 10,
      stderrBytes: 10,
      truncated: true,
      digest,
      // The recording's arrival marks cover exactly the kept bytes: one budget for both.
      marks: [
        { stream: 'stdout', atMs: expect.any(Number), bytes: 10 },
        { stream: 'stderr', atMs: expect.any(Number), bytes: 2 },
      ],
    });
    expect(report.outputComplete).toBe(true);
    // The journal counts what arrived, not what was kept.
    expect(gate.appended.filter((e) => e.kind === 'OUTPUT_RECEIVED').map((e) => e.payload)).toEqual([
      { attempt: 1, stream: 'stdout', bytes: 10 },
      { attempt: 1, stream: 'stderr', bytes: 10 },
    ]);
  });

  it('under the cap nothing is cut and the mark stays off; the digest is the same', async () => {
    const s = await server('stdout_stderr_exit_3');
    const report = await channel(new RecordingGate()).perform(request(s.port, pinned(s), { outputBytesMax: 20 }));
    expect(report.output).toEqual({
      stdout: out,
      stderr: err,
      stdoutBytes: 10,
      stderrBytes: 10,
      truncated: false,
      digest,
      marks: [
        { stream: 'stdout', atMs: expect.any(Number), bytes: 10 },
        { stream: 'stderr', atMs: expect.any(Number), bytes: 10 },
      ],
    });
  });
});

describe('when the host entry says accept_new', () => {
  it('the first key is stored only after auth and made durable as accepted_new; the next run finds it known', async () => {
    const s = await server('exit_0');
    const gate = new RecordingGate();
    const ssh = channel(gate);
    const first = await ssh.perform(request(s.port, 'accept_new'));
    expect(first.hostKey).toEqual({ fingerprint: s.hostKeyFingerprint, trust: 'accepted_new' });
    expect(ssh.knownHosts.lookup('lab', `agent@127.0.0.1:${s.port}`)).toBe(s.hostKeyFingerprint);
    const second = await ssh.perform(request(s.port, 'accept_new'));
    expect(second.hostKey).toEqual({ fingerprint: s.hostKeyFingerprint, trust: 'known' });
    expect(gate.dispatches.map((d) => d.peer_trust)).toEqual(['accepted_new', 'known_host']);
    expect(second.exitStatus).toBe(0);
  });

  it('a server that refuses auth leaves no key behind', async () => {
    const s = await server('reject_auth');
    const ssh = channel(new RecordingGate());
    const report = await ssh.perform(request(s.port, 'accept_new'));
    expect(report.setup).toMatchObject({ failure: 'ssh_auth', stage: 'user_auth' });
    expect(ssh.knownHosts.lookup('lab', `agent@127.0.0.1:${s.port}`)).toBeUndefined();
  });
});

/** A TCP front on one port that sends its n-th connection to `ports[n]`: two servers behind one endpoint. */
async function alternatingProxy(ports: readonly number[]): Promise<{ port: number; close: () => Promise<void> }> {
  let n = 0;
  const open = new Set<ReturnType<typeof connect>>();
  const front: Server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: ports[n++ % ports.length] ?? 0 });
    open.add(client).add(upstream);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const address = front.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        front.close(() => resolve());
      }),
  };
}

/** A fingerprint no test server holds: the host's real key as the file remembered it. */
const rememberedKey = 'SHA256:RememberedRememberedRememberedRemembered12';

describe('when known_hosts.json was changed outside Postern while the agent holds the host port', () => {
  const tampers: Array<[string, (file: string, impostor: string, endpoint: string) => string]> = [
    ['the stored key replaced by the impostor’s', (file, impostor) => file.replace(rememberedKey, impostor)],
    [
      'the entry deleted (first use again)',
      (file, _impostor, endpoint) => {
        const f = JSON.parse(file) as { hosts: Record<string, unknown> };
        delete f.hosts[`lab ${endpoint}`];
        return JSON.stringify(f);
      },
    ],
    [
      'a forged file naming the impostor’s key',
      (_file, impostor, endpoint) => JSON.stringify({ [`lab ${endpoint}`]: { fingerprint: impostor, endpoint } }),
    ],
  ];

  it.each(tampers)(
    '%s: refused at host_key_verified (ssh_known_hosts), the impostor never sees auth, a session or the command',
    async (_name, tamper) => {
      let authRequests = 0;
      const impostor = await server('exit_0', {
        onAuth: () => {
          authRequests += 1;
          return Promise.resolve();
        },
      });
      const gate = new RecordingGate();
      const ssh = channel(gate);
      const endpoint = `agent@127.0.0.1:${impostor.port}`;
      ssh.knownHosts.storeNew('lab', endpoint, rememberedKey, 1);
      writeFileSync(
        ssh.knownHosts.path,
        tamper(readFileSync(ssh.knownHosts.path, 'utf8'), impostor.hostKeyFingerprint, endpoint),
      );
      const tampered = readFileSync(ssh.knownHosts.path);
      const report = await ssh.perform(request(impostor.port, 'accept_new'));
      expect(report.setup).toMatchObject({ failure: 'ssh_known_hosts', stage: 'host_key_verified' });
      expect(report.attempts[0]?.detail).toMatch(/^known_hosts_(mac_failed|unsealed)$/);
      expectNotDispatched(report, gate);
      await serverRoundTrip(impostor.port);
      expect(authRequests).toBe(0);
      expect(events(impostor)).toEqual([]);
      expect(readFileSync(ssh.knownHosts.path)).toEqual(tampered);
    },
  );

  it('with the vault locked there is no first use either: refused before auth', async () => {
    const s = await server('exit_0');
    const gate = new RecordingGate();
    const ssh = channel(gate);
    vault.lock();
    try {
      const report = await ssh.perform(request(s.port, 'accept_new'));
      expect(report.setup).toMatchObject({ failure: 'ssh_known_hosts', stage: 'host_key_verified' });
      expect(report.attempts[0]?.detail).toBe('known_hosts_vault_locked');
      expectNotDispatched(report, gate);
    } finally {
      vault.unlock();
    }
    expect(events(s)).toEqual([]);
    expect(ssh.knownHosts.lookup('lab', `agent@127.0.0.1:${s.port}`)).toBeUndefined();
  });
});

describe('when two first uses of one host race, each server showing a different key', () => {
  it('the one that stores second is refused (SSH_HOST_KEY_REJECTED) and the file keeps the first key', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let authArrived = (): void => undefined;
    const arrived = new Promise<void>((resolve) => (authArrived = resolve));
    // `slow` looked its key up (absent) during key exchange, and waits at auth while `fast` completes first use.
    const slow = await server('exit_0', {
      onAuth: () => {
        authArrived();
        return held;
      },
    });
    const fast = await server('exit_0');
    const front = await alternatingProxy([slow.port, fast.port]);
    try {
      const gate = new RecordingGate();
      const ssh = channel(gate);
      const first = ssh.perform(request(front.port, 'accept_new'));
      await arrived;
      const second = await ssh.perform({ ...request(front.port, 'accept_new'), actionId: 'act_ssh_channel_second' });
      expect(second.hostKey).toEqual({ fingerprint: fast.hostKeyFingerprint, trust: 'accepted_new' });
      expect(second.exitStatus).toBe(0);
      release();
      const late = await first;
      expect(late.setup).toMatchObject({ failure: 'ssh_host_key', stage: 'host_key_verified' });
      expect(gate.dispatches.map((d) => d.peer_identity)).toEqual([fast.hostKeyFingerprint]);
      expect(events(slow)).toEqual([]);
      expect(ssh.knownHosts.lookup('lab', `agent@127.0.0.1:${front.port}`)).toBe(fast.hostKeyFingerprint);
    } finally {
      release();
      await front.close();
    }
  });
});
