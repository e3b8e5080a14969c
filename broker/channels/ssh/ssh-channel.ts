import { createHash, randomBytes } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { connect as netConnect, type Socket } from 'node:net';
import ssh2 from 'ssh2';
import type { NewEvent } from '../../contract/index.js';
import type { SetupFailure } from '../../core/index.js';
import { PendingAppends, type Clock, type DispatchGate, type HeldObservations } from '../../ports/index.js';
import { installDeferredExec, type DeferredExec } from './install-deferred-exec.js';
import { hostKeyFingerprint } from './host-key-fingerprint.js';
import {
  KnownHostsStore,
  KnownHostsUntrusted,
  type KnownHostsRefusal,
  type KnownHostsVault,
} from './known-hosts-store.js';
import { defaultSshLimits, type SshLimits } from './ssh-limits.js';

export type SshSetupStage =
  'dns' | 'tcp_connect' | 'ssh_transport' | 'host_key_verified' | 'user_auth' | 'session_channel';
export type HostKeyPolicy = { readonly pinned: readonly string[] } | 'accept_new';

/** One command as it will run, key already taken from the vault. Never logged or journaled. */
export interface SshWireRequest {
  readonly actionId: string;
  readonly host: {
    readonly name: string;
    readonly host: string;
    readonly port: number;
    readonly user: string;
    readonly hostKey: HostKeyPolicy;
  };
  /** OpenSSH private key; only read during this call (the vault zeroes it afterwards). */
  readonly privateKey: Buffer;
  readonly command: string;
  /**
   * The operation deadline (the host entry's timeout_ms): before dispatch it stops setup, after it the effect is
   * unknown (OPERATION_TIMEOUT). Never the caller's wait: a caller that stops waiting neither cuts nor closes this.
   */
  readonly timeoutMs: number;
  /** stdout + stderr bytes kept; counting continues beyond it. */
  readonly outputBytesMax: number;
  /**
   * The vault locked: stops the action before dispatch, and, once it fired while DISPATCH_STARTED was being made
   * durable, the exec request is never written (vaultLocked in the report).
   */
  readonly beforeDispatch: AbortSignal;
  /** The caller cancelled. */
  readonly cancel?: AbortSignal;
  /**
   * The caller appends the settlement at once, with AppendOptions.withHeld (settle.ts): after dispatch, unless the caller
   * cancelled (its record appends a caller event first), the channel does not commit its observations on its own; they
   * ride in the settlement's commit, and the report hands them over as `observations`.
   */
  readonly observationsRideWithSettlement?: boolean;
}

export interface SshAttemptReport {
  readonly n: number;
  readonly stage: string;
  readonly dispatched: boolean;
  readonly failure?: SetupFailure;
  readonly detail?: string;
  readonly connection_id?: string;
}

export interface SshOutput {
  /** Kept bytes (stdout first, then stderr, together at most outputBytesMax). */
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
  readonly truncated: boolean;
  /** sha256 over stdout bytes then stderr bytes as received (all of them, not only the kept ones). */
  readonly digest: string;
  /**
   * When each kept piece arrived, in arrival order: the session recording's timing (its bytes are the kept bytes, so
   * the recording shares the output budget). Each mark covers the next `bytes` of its stream's kept bytes.
   */
  readonly marks: readonly OutputMark[];
}

/** `bytes` kept bytes of `stream` that arrived `atMs` after the exec request was written (never decreasing). */
export interface OutputMark {
  readonly stream: 'stdout' | 'stderr';
  readonly atMs: number;
  readonly bytes: number;
}

/** Marks kept per run: beyond it each stream's later pieces join one last mark (bounds the recording's events). */
export const outputMarksMax = 4096;
/** Pieces of one stream arriving within this of the last mark join it: a burst is one recorded event. */
const outputMarkJoinMs = 5;

/** What the channel observed. It decides nothing: broker/core classifyOutcome does. */
export interface SshChannelReport {
  readonly attempts: readonly SshAttemptReport[];
  readonly stages: readonly string[];
  readonly setup?: { failure: SetupFailure; stage: SshSetupStage; attempts: number; attemptsMax: number };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'cancelled';
  readonly dispatchStarted: boolean;
  readonly handedToTransport: boolean;
  readonly requestComplete: boolean;
  readonly execReply?: 'success' | 'failure';
  readonly exitStatus?: number;
  readonly exitSignal?: string;
  readonly channelClosed: boolean;
  readonly eof: boolean;
  readonly transportBroken: boolean;
  /** The caller cancelled (the `cancel` signal) after dispatch. */
  readonly caller?: 'cancelled';
  /** The operation deadline (request.timeoutMs) fired after dispatch. */
  readonly operationDeadline?: boolean;
  /** The vault locked while DISPATCH_STARTED was being made durable: the exec request was never written. */
  readonly vaultLocked?: boolean;
  /**
   * While DISPATCH_STARTED was being made durable the server answered (CHANNEL_SUCCESS / CHANNEL_FAILURE) an exec
   * request that was never written: it broke the protocol, so the request never was. The channel did not end.
   */
  readonly unsolicitedReply?: 'success' | 'failure';
  readonly output: SshOutput;
  /** EOF and close both seen after the exit report: every output byte arrived. */
  readonly outputComplete: boolean;
  readonly hostKey?: { readonly fingerprint: string; readonly trust: 'pinned' | 'known' | 'accepted_new' };
  readonly connectionId?: string;
  readonly journalFailed?: unknown;
  /** With observationsRideWithSettlement: the observation appends, held for the settlement's commit. */
  readonly observations?: HeldObservations;
  /** Wall time (clock) when the exec request was written: the recording's start. */
  readonly execAtMs?: number;
}

export interface SshChannelOptions {
  readonly gate: DispatchGate;
  readonly clock: Clock;
  /** Directory of known_hosts.json (the data dir). */
  readonly knownHostsDir: string;
  /** Keeps known_hosts.json's MAC key: the file is checked (and written) only while it is unlocked. */
  readonly vault: KnownHostsVault;
  readonly limits?: Partial<SshLimits>;
}

/** A step before the SSH session channel opened failed, so nothing reached the remote (the HTTP channel's is SetupFailed). */
class SshSetupFailed extends Error {
  constructor(
    readonly failure: SetupFailure | 'cancelled',
    readonly stage: SshSetupStage,
    readonly detail: string,
  ) {
    super(`${stage}: ${failure}`);
  }
}

/** One attempt per action, one connection per attempt: no pooling and no internal setup retry yet. */
const setupAttemptsMax = 1;

/**
 * The SSH channel (ssh2 Client). Setup — DNS, TCP, transport, host key, user auth, session channel —
 * is done first, each stage recorded; a failure is SETUP_ATTEMPT_FAILED with that stage and nothing
 * was sent. Then, with the session channel open and the exec request held back (install-deferred-exec.ts),
 * `await gate.beginDispatch(...)`; only then is the exec request written. Observations are appended
 * as they happen (output counts once per stream at the end). See docs/ssh-channel.md.
 */
export class SshChannel {
  readonly limits: SshLimits;
  readonly knownHosts: KnownHostsStore;

  constructor(private readonly options: SshChannelOptions) {
    this.limits = { ...defaultSshLimits, ...options.limits };
    this.knownHosts = new KnownHostsStore(options.knownHostsDir, options.vault);
  }

  /** The runs connected now, for cutInFlight. */
  private readonly running = new Set<SshRun>();

  async perform(request: SshWireRequest): Promise<SshChannelReport> {
    const run = new SshRun(request, this.options.gate, this.limits, this.knownHosts, this.options.clock);
    this.running.add(run);
    try {
      return await run.perform();
    } finally {
      this.running.delete(run);
    }
  }

  /**
   * The broker stopped with commands still running (its journal is closed, so nothing more is recorded): their
   * connections are destroyed, so no process waits on a remote. The next start's recovery closes those actions.
   */
  cutInFlight(): void {
    for (const run of this.running) run.cut();
    this.running.clear();
  }
}

/** One action's connection: state of what was seen, and the waits, each with its own deadline. */
class SshRun {
  private readonly stages: string[] = [];
  private readonly attempts: SshAttemptReport[] = [];
  private readonly observations: PendingAppends;
  private journalFailed: unknown = undefined;
  private execAtMs: number | undefined;
  private client: ssh2.Client | undefined;
  private socket: Socket | undefined;
  private closed = false;
  private readonly connectionId = `ssh_${randomBytes(6).toString('hex')}`;
  private hostKey: SshChannelReport['hostKey'];
  private stagedKey: string | undefined;
  private hostKeyRejected = false;
  /** accept_new: known_hosts.json could not be trusted, so no key was (why, as a fixed word). */
  private knownHostsRefused: KnownHostsRefusal | undefined;
  private readonly operationDeadline = new AbortController();
  /** The session channel or the connection ended while the exec request was still held back. */
  private endedBeforeExec: 'channel_closed' | 'connection_closed' | undefined;
  /** The server answered an exec request still held back (a reply no request of ours asked for). */
  private unsolicitedReply: 'success' | 'failure' | undefined;
  private execSent = false;

  constructor(
    private readonly request: SshWireRequest,
    private readonly gate: DispatchGate,
    private readonly limits: SshLimits,
    private readonly knownHosts: KnownHostsStore,
    private readonly clock: Clock,
  ) {
    this.observations = new PendingAppends(gate);
  }

  async perform(): Promise<SshChannelReport> {
    const timer = setTimeout(() => this.operationDeadline.abort(), this.request.timeoutMs);
    try {
      return await this.run();
    } finally {
      clearTimeout(timer);
      this.client?.end();
      this.client?.destroy();
      this.socket?.destroy();
    }
  }

  /** Destroys the connection now (the broker stopped): every wait below ends as a closed connection. */
  cut(): void {
    this.client?.destroy();
    this.socket?.destroy();
  }

  private stopSignal(): AbortSignal {
    const signals = [this.request.beforeDispatch, this.operationDeadline.signal];
    if (this.request.cancel !== undefined) signals.push(this.request.cancel);
    return AbortSignal.any(signals);
  }

  private stoppedReason(): 'signal' | 'deadline' | 'cancelled' {
    if (this.request.cancel?.aborted === true) return 'cancelled';
    return this.operationDeadline.signal.aborted ? 'deadline' : 'signal';
  }

  private async run(): Promise<SshChannelReport> {
    const stop = this.stopSignal();
    let send: () => void;
    let execDone: Promise<ExecAnswer>;
    try {
      const address = await this.resolve(stop);
      this.socket = await this.connectTcp(address, stop);
      await this.handshake(stop);
      ({ send, execDone } = await this.openSession(stop));
    } catch (error) {
      if (!(error instanceof SshSetupFailed)) throw error;
      return this.setupFailed(error);
    }
    if (stop.aborted) return this.notDispatched({ stoppedBeforeDispatch: this.stoppedReason() });
    // The server answered an exec request not yet written: it breaks the protocol, so the channel is not used (its
    // reply bookkeeping no longer matches what was sent). Nothing was durable: a setup failure, nothing was sent.
    if (this.unsolicitedReply !== undefined)
      return this.setupFailed(
        new SshSetupFailed(
          'ssh_channel_protocol',
          'session_channel',
          `unsolicited_channel_${this.unsolicitedReply}_before_exec`,
        ),
      );
    // The server closed the channel, or the connection ended, before anything was durable: a session channel that
    // did not stay open is a setup failure, nothing was sent.
    if (this.endedBeforeExec !== undefined)
      return this.setupFailed(
        new SshSetupFailed('ssh_channel', 'session_channel', `${this.endedBeforeExec}_before_exec`),
      );
    try {
      // THE BOUNDARY: the exec request is written only after DISPATCH_STARTED is durable.
      await this.gate.beginDispatch(this.request.actionId, 1, {
        connection: 'fresh',
        connection_id: this.connectionId,
        // The verified host key is part of the durable boundary record, not only of the result.
        ...(this.hostKey === undefined
          ? {}
          : { peer_identity: this.hostKey.fingerprint, peer_trust: sshTrust[this.hostKey.trust] }),
      });
    } catch (journalFailed) {
      return this.notDispatched({ journalFailed });
    }
    this.attempts.push({ n: 1, stage: 'dispatch_started', dispatched: true, connection_id: this.connectionId });
    // The operation deadline, the caller's cancel or the vault's lock may have fired while DISPATCH_STARTED was being
    // made durable: the exec request is then never written (a locked vault starts no credential-backed action). The
    // row is durable, so the outcome stays unknown (never not_attempted), but the report says truthfully that nothing
    // was handed to the transport.
    // Likewise when the channel or the connection ended meanwhile (an exec request on a closed channel is never
    // written, the end is recorded as seen), or the server answered the request before it was written (it is never
    // written then: nothing ended, so nothing of an end is recorded). The outcome stays unknown.
    const stoppedDuringBoundary = this.callerStopped();
    const vaultLocked = this.request.beforeDispatch.aborted;
    const ended = this.endedBeforeExec;
    const unsolicited = this.unsolicitedReply;
    if (stoppedDuringBoundary !== undefined || vaultLocked || ended !== undefined || unsolicited !== undefined) {
      const seen: ExecSeen = {
        ...nothingSeen(),
        channelClosed: ended === 'channel_closed',
        transportBroken: ended === 'connection_closed',
        ...(stoppedDuringBoundary === undefined ? {} : { callerEvent: stoppedDuringBoundary }),
        ...(vaultLocked ? { vaultLocked } : {}),
        ...(unsolicited === undefined ? {} : { unsolicitedReply: unsolicited }),
      };
      return this.dispatchedReport(seen, false);
    }
    this.execAtMs = this.clock.nowMs();
    this.execSent = true;
    send();
    this.stages.push('exec_requested');
    this.record({
      kind: 'REQUEST_SENT',
      action_id: this.request.actionId,
      payload: { attempt: 1, request_complete: true },
    });
    return this.exchange(execDone);
  }

  private async resolve(stop: AbortSignal): Promise<string> {
    this.stages.push('dns');
    try {
      const answer = await bounded(dnsLookup(this.request.host.host), this.limits.dnsTimeoutMs, stop, 'dns');
      return answer.address;
    } catch (error) {
      if (error instanceof SshSetupFailed) throw error;
      const code = errnoCode(error);
      throw new SshSetupFailed(
        code === 'ENOTFOUND' || code === 'ENODATA' ? 'dns_not_found' : 'dns_temporary',
        'dns',
        code,
      );
    }
  }

  private async connectTcp(address: string, stop: AbortSignal): Promise<Socket> {
    this.stages.push('tcp_connect');
    const socket = netConnect({ host: address, port: this.request.host.port });
    this.socket = socket;
    const connected = new Promise<Socket>((resolve, reject) => {
      socket.once('connect', () => resolve(socket));
      socket.once('error', (error) => {
        const code = errnoCode(error);
        reject(new SshSetupFailed(tcpSetupFailure(code), 'tcp_connect', code));
      });
    });
    return bounded(connected, this.limits.connectTimeoutMs, stop, 'tcp_connect');
  }

  /** Transport, host key, user auth: resolves at ssh2's `ready`. */
  private async handshake(stop: AbortSignal): Promise<void> {
    this.stages.push('ssh_transport');
    const client = new ssh2.Client();
    this.client = client;
    let verified = false;
    let stageTimer: NodeJS.Timeout | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      const fail = (failure: SetupFailure, stage: SshSetupStage, detail: string): void => {
        clearTimeout(stageTimer);
        reject(new SshSetupFailed(failure, stage, detail));
      };
      stageTimer = setTimeout(
        () => fail('ssh_transport', 'ssh_transport', 'handshake_timeout'),
        this.limits.handshakeTimeoutMs,
      );
      client.on('ready', () => {
        clearTimeout(stageTimer);
        resolve();
      });
      client.on('error', (error: Error & { level?: string }) => {
        // ssh2 errors can quote key material: only our own codes and fixed words are kept.
        const refused = this.hostKeyRefusal();
        if (refused !== undefined) fail(refused.failure, 'host_key_verified', refused.detail);
        else if (!verified)
          fail('ssh_transport', 'ssh_transport', error.level === 'client-socket' ? 'socket_error' : 'handshake_failed');
        else if (error.level === 'client-authentication') fail('ssh_auth', 'user_auth', 'all_methods_failed');
        else fail('ssh_transport', 'user_auth', error.level === 'client-socket' ? 'socket_error' : 'transport_failed');
      });
      client.on('close', () => {
        this.closed = true;
        const refused = this.hostKeyRefusal();
        if (refused !== undefined) fail(refused.failure, 'host_key_verified', refused.detail);
        // A close is never the server refusing the key (that is the 'client-authentication' error above): during
        // user auth it is the transport failing at that stage.
        else fail('ssh_transport', verified ? 'user_auth' : 'ssh_transport', 'connection_closed');
      });
      client.connect({
        sock: this.socket,
        username: this.request.host.user,
        privateKey: this.request.privateKey,
        // Our own stage timers decide; ssh2's covers everything only as a backstop.
        readyTimeout: this.limits.handshakeTimeoutMs + this.limits.authTimeoutMs + 1_000,
        keepaliveInterval: 0,
        hostVerifier: (key: Buffer) => {
          const ok = this.verifyHostKey(key);
          if (ok) {
            verified = true;
            this.stages.push('host_key_verified', 'user_auth');
            clearTimeout(stageTimer);
            // A server that stalls auth refused nothing: a transport failure at user_auth, like a close.
            stageTimer = setTimeout(
              () => fail('ssh_transport', 'user_auth', 'auth_timeout'),
              this.limits.authTimeoutMs,
            );
          }
          return ok;
        },
      });
    });
    try {
      await bounded(ready, this.limits.handshakeTimeoutMs + this.limits.authTimeoutMs, stop, 'ssh_transport');
    } finally {
      clearTimeout(stageTimer);
    }
    // accept_new: stored only now, after the server proved it holds the key AND let us in.
    if (this.stagedKey !== undefined) this.hostKey = this.storeStaged(this.stagedKey);
  }

  /**
   * Stores the first-use key unless an entry for this host appeared since the lookup (another action's first use
   * raced this one): the same key is then known, a different one is refused like any changed key, and the file keeps
   * the entry it had. A file that cannot be trusted now is refused as at lookup; nothing is written over it.
   */
  private storeStaged(staged: string): NonNullable<SshChannelReport['hostKey']> {
    let answer;
    try {
      answer = this.knownHosts.storeNew(this.request.host.name, this.endpoint(), staged, this.clock.nowMs());
    } catch (error) {
      if (error instanceof KnownHostsUntrusted)
        throw new SshSetupFailed('ssh_known_hosts', 'host_key_verified', `known_hosts_${error.reason}`);
      throw new SshSetupFailed('ssh_host_key', 'host_key_verified', 'known_hosts_not_writable');
    }
    if (answer.kind === 'stored') return { fingerprint: staged, trust: 'accepted_new' };
    this.hostKey = { fingerprint: staged, trust: 'known' };
    if (answer.fingerprint !== staged)
      throw new SshSetupFailed('ssh_host_key', 'host_key_verified', `host key ${staged} not trusted`);
    return { fingerprint: staged, trust: 'known' };
  }

  /** The verifier's refusal, if it refused: known_hosts.json not trusted, or a key that matches no pin or entry. */
  private hostKeyRefusal(): { failure: SetupFailure; detail: string } | undefined {
    if (this.knownHostsRefused !== undefined)
      return { failure: 'ssh_known_hosts', detail: `known_hosts_${this.knownHostsRefused}` };
    if (this.hostKeyRejected)
      return { failure: 'ssh_host_key', detail: `host key ${this.hostKey?.fingerprint ?? ''} not trusted` };
    return undefined;
  }

  private verifyHostKey(key: Buffer): boolean {
    const fingerprint = hostKeyFingerprint(key);
    const policy = this.request.host.hostKey;
    if (policy !== 'accept_new') {
      this.hostKey = { fingerprint, trust: 'pinned' };
      this.hostKeyRejected = !policy.pinned.includes(fingerprint);
      return !this.hostKeyRejected;
    }
    let known: string | undefined;
    try {
      known = this.knownHosts.lookup(this.request.host.name, this.endpoint());
    } catch (error) {
      // Never first use: a file that cannot be trusted (or checked) trusts no key at all.
      this.hostKey = { fingerprint, trust: 'known' };
      this.knownHostsRefused = error instanceof KnownHostsUntrusted ? error.reason : 'unreadable';
      return false;
    }
    this.hostKey = { fingerprint, trust: known === undefined ? 'accepted_new' : 'known' };
    if (known === undefined) {
      this.stagedKey = fingerprint;
      return true;
    }
    this.hostKeyRejected = known !== fingerprint;
    return !this.hostKeyRejected;
  }

  private endpoint(): string {
    return `${this.request.host.user}@${this.request.host.host}:${this.request.host.port}`;
  }

  /** Opens the session channel; resolves with the held-back exec write and the exec reply. */
  private async openSession(stop: AbortSignal): Promise<{ send: () => void; execDone: Promise<ExecAnswer> }> {
    this.stages.push('session_channel');
    const client = this.client as ssh2.Client;
    let deferred: DeferredExec;
    try {
      deferred = installDeferredExec(client);
    } catch {
      throw new SshSetupFailed('ssh_channel_refused', 'session_channel', 'ssh2_seam_unavailable');
    }
    let openFailed: (error: SshSetupFailed) => void = () => undefined;
    const failedOpen = new Promise<never>((_resolve, reject) => {
      openFailed = reject;
    });
    failedOpen.catch(() => undefined);
    // Whether the server confirmed the channel: read from the seam, set inside ssh2's handler, so an end or a reply
    // packed into the same read as the confirmation is still seen as coming after the open.
    const channelIsOpen = deferred.isOpen;
    const execDone = new Promise<ExecAnswer>((settle) => {
      const resolve = (answer: ExecAnswer): void => {
        // Before the exec request is written nothing can answer it: a reply then is the server's protocol violation,
        // anything else ends the channel unused.
        if (!this.execSent && answer.kind === 'unsolicited') this.unsolicitedReply ??= answer.reply;
        else if (!this.execSent && this.endedBeforeExec === undefined)
          this.endedBeforeExec = answer.kind === 'closed' ? 'connection_closed' : 'channel_closed';
        settle(answer);
      };
      client.on('close', () => {
        this.closed = true;
        if (!channelIsOpen()) openFailed(new SshSetupFailed('ssh_channel', 'session_channel', 'connection_closed'));
        resolve({ kind: 'closed' });
      });
      client.exec(this.request.command, (error, stream) => {
        // A CHANNEL_SUCCESS (exec's callback without error) or a CHANNEL_FAILURE before the exec request was written
        // answers nothing we sent; the stream is not watched and nothing of an exec reply is recorded.
        if (!this.execSent && channelIsOpen() && (error === undefined || deferred.unsolicitedChannelFailure())) {
          resolve({ kind: 'unsolicited', reply: error === undefined ? 'success' : 'failure' });
          return;
        }
        if (error === undefined) {
          // Listeners go on in this same tick: ssh2 may deliver data, exit-status and close in the
          // same TCP read as CHANNEL_SUCCESS, and an 'exit' emitted with no listener is lost.
          resolve({ kind: 'accepted', watch: this.watchStream(stream) });
          return;
        }
        // Before the channel opened: CHANNEL_OPEN_FAILURE (setup). After, ssh2 gives the same error for the server's
        // CHANNEL_FAILURE (a refusal: nothing ran), for a CHANNEL_CLOSE before any reply and for a lost connection
        // (the command may have run): only a CHANNEL_FAILURE seen by the seam, in this very call, is a refusal.
        if (!channelIsOpen()) openFailed(new SshSetupFailed('ssh_channel_refused', 'session_channel', 'open_refused'));
        else if (deferred.answeringChannelFailure()) resolve({ kind: 'refused' });
        else if (!this.closed) resolve({ kind: 'channel_closed' });
        else resolve({ kind: 'closed' });
      });
    });
    const { send } = await bounded(
      Promise.race([deferred.channelOpen, failedOpen]),
      this.limits.channelOpenTimeoutMs,
      stop,
      'session_channel',
    );
    return { send, execDone };
  }

  /** After the exec request: reply, output, exit, EOF, close — each wait bounded. */
  private async exchange(execDone: Promise<ExecAnswer>): Promise<SshChannelReport> {
    return this.dispatchedReport(await this.observeExec(execDone), true);
  }

  /**
   * The report once DISPATCH_STARTED is durable: `sent` says whether the exec request was written. Its observations
   * are committed (or handed over held) here.
   */
  private async dispatchedReport(seen: ExecSeen, sent: boolean): Promise<SshChannelReport> {
    const { execReply, exitStatus, exitSignal, eof, channelClosed, transportBroken, callerEvent } = seen;
    const { vaultLocked, unsolicitedReply } = seen;
    if (exitStatus !== undefined) this.stages.push('exit_status');
    if (exitSignal !== undefined) this.stages.push('exit_signal');
    if (eof) this.stages.push('eof');
    if (channelClosed) this.stages.push('channel_close');
    const kept = seen.output.result();
    const id = this.request.actionId;
    const n = 1;
    if (execReply === 'success') {
      this.record({
        kind: 'OUTPUT_RECEIVED',
        action_id: id,
        payload: { attempt: n, stream: 'stdout', bytes: kept.stdoutBytes },
      });
      this.record({
        kind: 'OUTPUT_RECEIVED',
        action_id: id,
        payload: { attempt: n, stream: 'stderr', bytes: kept.stderrBytes },
      });
    }
    if (channelClosed) this.record({ kind: 'CHANNEL_CLOSED', action_id: id, payload: { attempt: n } });
    if (transportBroken) this.record({ kind: 'CONNECTION_LOST', action_id: id, payload: { attempt: n } });
    // The observations held since the exec ride in the settlement's commit, or share one commit now (or rode in an
    // earlier one).
    const ride = this.request.observationsRideWithSettlement === true && callerEvent !== 'cancelled';
    if (!ride) this.journalFailed ??= await this.observations.settled();
    return {
      ...(ride ? { observations: this.observations } : {}),
      attempts: this.attempts,
      stages: this.stages,
      dispatchStarted: true,
      handedToTransport: sent,
      requestComplete: sent,
      ...(execReply === undefined ? {} : { execReply }),
      ...(exitStatus === undefined ? {} : { exitStatus }),
      ...(exitSignal === undefined ? {} : { exitSignal }),
      channelClosed,
      eof,
      transportBroken,
      ...(callerEvent === 'cancelled'
        ? { caller: callerEvent }
        : callerEvent === 'deadline'
          ? { operationDeadline: true }
          : {}),
      ...(vaultLocked === true ? { vaultLocked } : {}),
      ...(unsolicitedReply === undefined ? {} : { unsolicitedReply }),
      output: kept,
      outputComplete: channelClosed && eof && !transportBroken,
      ...(this.hostKey === undefined ? {} : { hostKey: this.hostKey }),
      connectionId: this.connectionId,
      ...(this.journalFailed === undefined ? {} : { journalFailed: this.journalFailed }),
      ...(this.execAtMs === undefined ? {} : { execAtMs: this.execAtMs }),
    };
  }

  /** Waits for the exec reply, then for the command's end, the caller's stop or a lost connection, whichever first. */
  private async observeExec(execDone: Promise<ExecAnswer>): Promise<ExecSeen> {
    const caller =
      this.request.cancel === undefined
        ? this.operationDeadline.signal
        : AbortSignal.any([this.operationDeadline.signal, this.request.cancel]);
    const callerStop = new Promise<'caller'>((resolve) => {
      if (caller.aborted) resolve('caller');
      caller.addEventListener('abort', () => resolve('caller'), { once: true });
    });
    const nothing = nothingSeen();
    const replyTimeout = delay(this.limits.execReplyTimeoutMs, 'reply_timeout' as const);
    const first = await Promise.race([execDone, callerStop, replyTimeout.promise]);
    replyTimeout.cancel();
    if (first === 'caller') return { ...nothing, callerEvent: this.callerReason() };
    if (first === 'reply_timeout' || first.kind === 'closed') return { ...nothing, transportBroken: true };
    // Unreachable: a reply before the exec request keeps it from ever being written.
    if (first.kind === 'unsolicited') return { ...nothing, unsolicitedReply: first.reply };
    if (first.kind === 'channel_closed') return { ...nothing, channelClosed: true };
    if (first.kind === 'refused') return { ...nothing, execReply: 'failure' };
    const watch = first.watch;
    let callerEvent: ExecSeen['callerEvent'];
    let transportBroken = false;
    const end = await Promise.race([watch.ended, callerStop]);
    if (end === 'caller') {
      // The remote command is not assumed stopped; the exit status may still arrive, but the
      // caller no longer waits for it.
      callerEvent = this.callerReason();
    } else if (end === 'lost') transportBroken = true;
    if (
      end !== 'caller' &&
      !watch.channelClosed &&
      (watch.exitStatus !== undefined || watch.exitSignal !== undefined)
    ) {
      const wait = delay(this.limits.closeAfterExitTimeoutMs, 'close_timeout' as const);
      const late = await Promise.race([watch.ended, wait.promise]).finally(() => wait.cancel());
      if (late !== 'closed') transportBroken = true;
    }
    const { exitStatus, exitSignal, eof, channelClosed, output } = watch;
    return {
      execReply: 'success',
      ...(exitStatus === undefined ? {} : { exitStatus }),
      ...(exitSignal === undefined ? {} : { exitSignal }),
      eof,
      channelClosed,
      transportBroken,
      ...(callerEvent === undefined ? {} : { callerEvent }),
      output,
    };
  }

  /** Everything the exec stream says, recorded as it happens; `ended` says how it ended. */
  private watchStream(stream: ssh2.ClientChannel): StreamWatch {
    const id = this.request.actionId;
    const n = 1;
    // Recorded here, in ssh2's callback, so it is appended before anything the stream reports.
    this.stages.push('exec_accepted');
    this.record({ kind: 'REMOTE_RESPONSE_STARTED', action_id: id, payload: { attempt: n } });
    const watch: StreamWatch = {
      output: new OutputCollector(this.request.outputBytesMax, () => this.clock.nowMs() - (this.execAtMs ?? 0)),
      eof: false,
      channelClosed: false,
      ended: Promise.resolve('closed'),
    };
    watch.ended = new Promise<'closed' | 'lost'>((resolve) => {
      stream.on('data', (chunk: Buffer) => watch.output.add('stdout', chunk));
      stream.stderr.on('data', (chunk: Buffer) => watch.output.add('stderr', chunk));
      stream.on('exit', (code: number | null, signal?: string) => {
        // A command exits once: a server repeating exit-status gets its first report kept.
        if (watch.exitStatus !== undefined || watch.exitSignal !== undefined) return;
        if (typeof code === 'number') {
          watch.exitStatus = code;
          this.record({ kind: 'EXIT_STATUS', action_id: id, payload: { attempt: n, exit_status: code } });
        } else if (typeof signal === 'string') {
          watch.exitSignal = signal.slice(0, 32);
          this.record({ kind: 'EXIT_SIGNAL', action_id: id, payload: { attempt: n, signal: watch.exitSignal } });
        }
      });
      stream.on('end', () => {
        // As for close below: ssh2 ends the stream itself when the connection dies, which is no CHANNEL_EOF.
        if (!this.closed) watch.eof = true;
      });
      stream.on('close', () => {
        // ssh2 closes the stream itself when the connection dies (cleanup): that is not the
        // server's CHANNEL_CLOSE, so a close after the connection's own close is a loss.
        if (this.closed) resolve('lost');
        else {
          watch.channelClosed = true;
          resolve('closed');
        }
      });
      // A connection `close` ends every channel on it, whether or not ssh2 closes the stream.
      this.client?.on('close', () => resolve('lost'));
      stream.resume();
    });
    return watch;
  }

  /** The caller cancelled or the operation deadline fired (cancel first), else undefined. */
  private callerStopped(): 'deadline' | 'cancelled' | undefined {
    if (this.request.cancel?.aborted === true) return 'cancelled';
    return this.operationDeadline.signal.aborted ? 'deadline' : undefined;
  }

  private callerReason(): 'deadline' | 'cancelled' {
    return this.request.cancel?.aborted === true ? 'cancelled' : 'deadline';
  }

  /** Observations are appended in the order seen, held for one commit, without holding up the stream. */
  private record(event: NewEvent): void {
    this.observations.add(event);
  }

  private async setupFailed(error: SshSetupFailed): Promise<SshChannelReport> {
    if (error.failure === 'cancelled') return this.notDispatched({ stoppedBeforeDispatch: this.stoppedReason() });
    const detail = error.detail.slice(0, 500);
    this.attempts.push({ n: 1, stage: error.stage, dispatched: false, failure: error.failure, detail });
    try {
      await this.gate.append({
        kind: 'SETUP_ATTEMPT_FAILED',
        action_id: this.request.actionId,
        payload: { attempt: 1, stage: error.stage, detail },
      });
    } catch (journalFailed) {
      return this.notDispatched({ journalFailed });
    }
    return this.notDispatched({
      setup: { failure: error.failure, stage: error.stage, attempts: 1, attemptsMax: setupAttemptsMax },
    });
  }

  private notDispatched(extra: Partial<SshChannelReport>): SshChannelReport {
    return {
      attempts: this.attempts,
      stages: this.stages,
      dispatchStarted: false,
      handedToTransport: false,
      requestComplete: false,
      channelClosed: false,
      eof: false,
      transportBroken: false,
      output: new OutputCollector(0).result(),
      outputComplete: false,
      ...(this.hostKey === undefined ? {} : { hostKey: this.hostKey }),
      ...extra,
    };
  }
}

/**
 * refused: the server's CHANNEL_FAILURE. channel_closed: the server closed the channel (CHANNEL_CLOSE) before
 * answering the exec request. closed: the connection ended first. unsolicited: a reply that came before the exec
 * request was written (never after: the exec is then not written).
 */
type ExecAnswer =
  | { kind: 'accepted'; watch: StreamWatch }
  | { kind: 'refused' }
  | { kind: 'channel_closed' }
  | { kind: 'closed' }
  | { kind: 'unsolicited'; reply: 'success' | 'failure' };

/** What the exchange saw after the exec request; `output` is empty unless the server accepted the exec. */
interface ExecSeen {
  execReply?: 'success' | 'failure';
  exitStatus?: number;
  exitSignal?: string;
  eof: boolean;
  channelClosed: boolean;
  transportBroken: boolean;
  callerEvent?: 'deadline' | 'cancelled';
  vaultLocked?: boolean;
  unsolicitedReply?: 'success' | 'failure';
  output: OutputCollector;
}

/** Nothing seen back (yet): no reply, no output, no close. */
function nothingSeen(): ExecSeen {
  return { eof: false, channelClosed: false, transportBroken: false, output: new OutputCollector(0) };
}

interface StreamWatch {
  readonly output: OutputCollector;
  exitStatus?: number;
  exitSignal?: string;
  eof: boolean;
  channelClosed: boolean;
  ended: Promise<'closed' | 'lost'>;
}

/** Keeps up to `bytesMax` of stdout+stderr, counts and hashes everything. */
class OutputCollector {
  private readonly kept: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
  private readonly counts = { stdout: 0, stderr: 0 };
  private keptBytes = 0;
  private readonly hashes = { stdout: createHash('sha256'), stderr: createHash('sha256') };
  private readonly marks: OutputMark[] = [];

  constructor(
    private readonly bytesMax: number,
    private readonly elapsedMs: () => number = () => 0,
  ) {}

  add(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    this.counts[stream] += chunk.length;
    this.hashes[stream].update(chunk);
    const room = this.bytesMax - this.keptBytes;
    if (room <= 0) return;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.kept[stream].push(Buffer.from(part));
    this.keptBytes += part.length;
    this.mark(stream, part.length);
  }

  private mark(stream: 'stdout' | 'stderr', bytes: number): void {
    const last = this.marks.at(-1);
    // The wall clock may step back; the recording's times never do.
    const atMs = Math.max(last?.atMs ?? 0, Math.round(this.elapsedMs()));
    let join =
      last !== undefined && last.stream === stream && atMs - last.atMs <= outputMarkJoinMs ? this.marks.length - 1 : -1;
    // Past the bound, each stream's later pieces join its one overflow mark (at most two beyond the bound).
    for (let i = outputMarksMax; join === -1 && i < this.marks.length; i += 1)
      if (this.marks[i]?.stream === stream) join = i;
    const joined = this.marks[join];
    if (joined !== undefined) this.marks[join] = { ...joined, bytes: joined.bytes + bytes };
    else this.marks.push({ stream, atMs, bytes });
  }

  result(): SshOutput {
    const digest = createHash('sha256')
      .update(this.hashes.stdout.digest())
      .update(this.hashes.stderr.digest())
      .digest('hex');
    return {
      stdout: Buffer.concat(this.kept.stdout),
      stderr: Buffer.concat(this.kept.stderr),
      stdoutBytes: this.counts.stdout,
      stderrBytes: this.counts.stderr,
      truncated: this.counts.stdout + this.counts.stderr > this.keptBytes,
      digest: `sha256:${digest}`,
      marks: this.marks,
    };
  }
}

/** Races `work` against its own deadline and the stop signal; both become SshSetupFailed for `stage`. */
async function bounded<T>(work: Promise<T>, timeoutMs: number, stop: AbortSignal, stage: SshSetupStage): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const timeoutFailure: SetupFailure =
    stage === 'dns'
      ? 'dns_temporary'
      : stage === 'tcp_connect'
        ? 'connect_timeout'
        : stage === 'session_channel'
          ? 'ssh_channel'
          : // A deadline is never an authentication refusal, user_auth included.
            'ssh_transport';
  const guard = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new SshSetupFailed(timeoutFailure, stage, 'timeout')), timeoutMs);
    onAbort = () => reject(new SshSetupFailed('cancelled', stage, 'stopped'));
    if (stop.aborted) onAbort();
    else stop.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, guard]);
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) stop.removeEventListener('abort', onAbort);
  }
}

function delay<T>(ms: number, value: T): { promise: Promise<T>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(value), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

/** A failed TCP connect by its errno code, as the HTTP channel maps it (a reset is refused, not a timeout). */
export function tcpSetupFailure(code: string): SetupFailure {
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET') return 'connect_refused';
  if (code === 'ETIMEDOUT') return 'connect_timeout';
  return 'network_unreachable';
}

function errnoCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,32}$/.test(code) ? code : 'unknown';
}

const sshTrust = { pinned: 'pinned', known: 'known_host', accepted_new: 'accepted_new' } as const;
