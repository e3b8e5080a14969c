import Database from 'better-sqlite3';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import ssh2 from 'ssh2';
import { hostKeyFingerprint } from '../channels/ssh/index.js';
import { createTempDir } from './temp-dir.js';
import { generateKey } from './test-sshd.js';

/** The part of ssh2 1.17's server-side `_protocol` the scripted session messages use. */
interface SessionProtocol {
  channelClose(recipient: number): void;
  channelFailure(recipient: number): void;
  channelSuccess(recipient: number): void;
  ping(): void;
  _handlers: Record<string, unknown>;
}

/** What the server does with the one session it gets. */
export type SshBehavior =
  | 'exit_0'
  /** Accepts exec, writes some stdout, closes the channel without any exit-status. */
  | 'close_without_exit'
  /** Sends exit-status 7, then destroys the TCP socket (no EOF, no CHANNEL_CLOSE). */
  | 'exit_then_destroy'
  /** Writes half of its output, then destroys the socket: no exit-status. */
  | 'half_output_then_destroy'
  /** Accepts exec (CHANNEL_SUCCESS) and then never says anything again. */
  | 'silent_after_exec'
  /** Receives the exec request and never replies to it (no success, no failure). */
  | 'no_exec_reply'
  /** Receives the exec request (as if it ran the command), then closes the channel without any reply to it. */
  | 'close_without_exec_reply'
  /** Refuses the session channel (CHANNEL_OPEN_FAILURE). */
  | 'refuse_session'
  /** Refuses the exec request (CHANNEL_FAILURE). */
  | 'refuse_exec'
  /** Rejects every authentication attempt (user auth fails; no session). */
  | 'reject_auth'
  /** Ends the TCP connection (FIN) at the first authentication request, answering nothing: no key was refused. */
  | 'fin_during_auth'
  /** Never answers any authentication request (neither success nor failure) and keeps the connection open. */
  | 'stall_auth'
  /** Accepts exec, writes stdout, then reports exit-signal KILL (no exit-status) and closes the channel. */
  | 'exit_signal_kill'
  /** Accepts exec, writes stdout then stderr, exit-status 3, closes the channel. */
  | 'stdout_stderr_exit_3'
  /**
   * Opens the session and waits for the test to end it with endSession() before any exec request; an exec request
   * that arrives anyway is logged and answered as exit_0.
   */
  | 'end_session_when_told'
  /**
   * Sends a CHANNEL_CLOSE right behind the session's CHANNEL_OPEN_CONFIRMATION, in the same TCP write (the socket is
   * corked around both), so the client reads the open and the end in one read; an exec request that arrives anyway is
   * logged and answered as exit_0 (if the channel still takes it).
   */
  | 'close_at_open'
  /** As close_at_open, with a CHANNEL_FAILURE that no request asked for (the channel stays open). */
  | 'failure_at_open'
  /** As close_at_open, with a CHANNEL_SUCCESS that no request asked for (the channel stays open). */
  | 'success_at_open';

/** What endSession() and the *_at_open behaviors send on the open session, as ssh2 1.17's _protocol writes it. */
export type SessionMessage = 'channel_close' | 'channel_failure' | 'channel_success';

const atOpen: Partial<Record<SshBehavior, SessionMessage>> = {
  close_at_open: 'channel_close',
  failure_at_open: 'channel_failure',
  success_at_open: 'channel_success',
};

export interface SshServerLogEntry {
  readonly event:
    | 'session_refused'
    | 'session_opened'
    | 'exec_received'
    | 'exec_accepted'
    | 'exec_refused'
    | 'stdout_written'
    | 'stderr_written'
    | 'exit_signal_sent'
    | 'exit_status_sent'
    | 'channel_closed'
    | 'channel_failure_sent'
    | 'channel_success_sent'
    | 'socket_ended'
    | 'auth_unanswered'
    | 'socket_destroyed';
  readonly command?: string;
  readonly bytes?: number;
  readonly exitStatus?: number;
  /** New DISPATCH_STARTED rows (since the server started) visible through its own SQLite connection at exec receipt. */
  readonly dispatchRowsVisible?: number;
}

/**
 * An in-process ssh2 Server that misbehaves on purpose, one behavior per instance. It holds the
 * raw TCP socket (`injectSocket`) so it can destroy it at exact points, accepts any public key, and
 * logs what it really did so tests compare the broker's record with the truth.
 */
export class MisbehavingSshServer {
  readonly log: SshServerLogEntry[] = [];
  private readonly waiters: Array<{ event: SshServerLogEntry['event']; resolve: () => void }> = [];
  readonly hostKeyFingerprint: string;
  private readonly net: NetServer;
  private readonly ssh: ssh2.Server;
  private readonly sockets = new Set<Socket>();
  private readonly db: Database.Database | undefined;
  /** DISPATCH_STARTED rows already in the journal when the server started (earlier tests' actions). */
  private readonly dispatchRowsAtStart: number;
  /** The last session opened, with its connection (for endSession). */
  private opened: { client: ssh2.Connection; session: ssh2.Session } | undefined;
  port = 0;

  private constructor(
    private readonly behavior: SshBehavior,
    journalPath: string | undefined,
    /**
     * Called at each public-key auth request; the request is answered once what it returns settles: a test can hold a
     * client between key exchange and user auth (not logged: the log is what reached the session).
     */
    private readonly onAuth: () => Promise<void>,
  ) {
    // ssh2 does not read PKCS#8 ed25519 keys: the host key comes from ssh-keygen (OpenSSH format).
    const dir = createTempDir('postern-misbehaving-ssh-');
    let pem: Buffer;
    try {
      pem = generateKey(dir.path, 'host', 'misbehaving-host').privateKey;
    } finally {
      dir.remove();
    }
    const parsed = ssh2.utils.parseKey(pem);
    if (parsed instanceof Error) throw new Error('host key unreadable');
    this.hostKeyFingerprint = hostKeyFingerprint(parsed.getPublicSSH());
    this.db =
      journalPath === undefined ? undefined : new Database(journalPath, { readonly: true, fileMustExist: true });
    this.dispatchRowsAtStart = this.countDispatchRows() ?? 0;
    this.ssh = new ssh2.Server({ hostKeys: [pem] }, (client) => this.onClient(client));
    this.net = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      this.ssh.injectSocket(socket);
    });
  }

  static async start(
    behavior: SshBehavior,
    options: { journalPath?: string; onAuth?: () => Promise<void> } = {},
  ): Promise<MisbehavingSshServer> {
    const onAuth = options.onAuth ?? (() => Promise.resolve());
    const server = new MisbehavingSshServer(behavior, options.journalPath, onAuth);
    await new Promise<void>((resolve) => server.net.listen(0, '127.0.0.1', resolve));
    const address = server.net.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    server.port = address.port;
    return server;
  }

  private onClient(client: ssh2.Connection): void {
    client.on('error', () => undefined);
    client.on('authentication', (ctx) => {
      if (this.behavior === 'fin_during_auth') {
        for (const socket of this.sockets) socket.end();
        this.note({ event: 'socket_ended' });
      } else if (this.behavior === 'stall_auth') this.note({ event: 'auth_unanswered' });
      else if (ctx.method !== 'publickey' || this.behavior === 'reject_auth') ctx.reject(['publickey']);
      else void this.onAuth().then(() => ctx.accept());
    });
    client.on('ready', () => {
      client.on('session', (accept, reject) => {
        if (this.behavior === 'refuse_session') {
          this.note({ event: 'session_refused' });
          reject();
          return;
        }
        const message = atOpen[this.behavior];
        // Corked, the confirmation and the message go out in one write: the client parses both in one read.
        if (message !== undefined) for (const socket of this.sockets) socket.cork();
        const session = accept();
        this.opened = { client, session };
        this.note({ event: 'session_opened' });
        if (message !== undefined) {
          this.sendOnSession(message);
          process.nextTick(() => {
            for (const socket of this.sockets) socket.uncork();
          });
        }
        session.on('exec', (acceptExec, rejectExec, info) => {
          this.note({ event: 'exec_received', command: info.command, dispatchRowsVisible: this.dispatchRows() });
          if (this.behavior === 'close_without_exec_reply') this.closeUnanswered(client, session);
          else this.onExec(acceptExec, rejectExec);
        });
      });
    });
  }

  private onExec(acceptExec: () => ssh2.ServerChannel, rejectExec: () => void): void {
    switch (this.behavior) {
      case 'refuse_exec':
        rejectExec();
        this.note({ event: 'exec_refused' });
        return;
      case 'no_exec_reply':
        return;
      default:
        break;
    }
    const channel = acceptExec();
    this.note({ event: 'exec_accepted' });
    const write = (text: string): void => {
      channel.write(text);
      this.note({ event: 'stdout_written', bytes: Buffer.byteLength(text) });
    };
    switch (this.behavior) {
      case 'exit_0':
      case 'end_session_when_told':
      case 'close_at_open':
      case 'failure_at_open':
      case 'success_at_open':
        write('hello\n');
        channel.exit(0);
        this.note({ event: 'exit_status_sent', exitStatus: 0 });
        channel.end();
        this.note({ event: 'channel_closed' });
        return;
      case 'close_without_exit':
        write('partial\n');
        channel.close();
        this.note({ event: 'channel_closed' });
        return;
      case 'exit_then_destroy':
        write('done\n');
        channel.exit(7);
        this.note({ event: 'exit_status_sent', exitStatus: 7 });
        this.destroyAfterFlush();
        return;
      case 'exit_signal_kill':
        write('killed soon\n');
        channel.exit('KILL');
        this.note({ event: 'exit_signal_sent' });
        channel.end();
        this.note({ event: 'channel_closed' });
        return;
      case 'stdout_stderr_exit_3':
        write('out-bytes\n');
        channel.stderr.write('err-bytes\n');
        this.note({ event: 'stderr_written', bytes: 'err-bytes\n'.length });
        channel.exit(3);
        this.note({ event: 'exit_status_sent', exitStatus: 3 });
        channel.end();
        this.note({ event: 'channel_closed' });
        return;
      case 'half_output_then_destroy':
        write('first half of the output\n');
        this.destroyAfterFlush();
        return;
      default:
        return;
    }
  }

  /**
   * CHANNEL_CLOSE for a session whose exec request got no reply. ssh2's Server has no public call for it (a Session
   * only closes through the channel acceptExec returns, which sends CHANNEL_SUCCESS first), so this uses ssh2 1.17's
   * own `_protocol.channelClose` with the session's recipient id; test code only.
   */
  private closeUnanswered(client: ssh2.Connection, session: ssh2.Session): void {
    const protocol = (client as unknown as { _protocol: { channelClose(recipient: number): void } })._protocol;
    const info = (session as unknown as { _chanInfo: { outgoing: { id: number } } })._chanInfo;
    protocol.channelClose(info.outgoing.id);
    this.note({ event: 'channel_closed' });
  }

  /**
   * Ends or upsets the open session before any exec request: CHANNEL_CLOSE, or a CHANNEL_FAILURE / CHANNEL_SUCCESS
   * that no request asked for (the channel stays open, so an exec request sent anyway still arrives and is logged).
   * Resolves once the client answered a keepalive sent right after it, so the client has read the message.
   */
  endSession(how: SessionMessage): Promise<void> {
    const protocol = this.sessionProtocol().protocol;
    const answered = new Promise<void>((resolve) => {
      protocol._handlers.REQUEST_FAILURE = () => {
        delete protocol._handlers.REQUEST_FAILURE;
        resolve();
      };
    });
    this.sendOnSession(how);
    protocol.ping();
    return answered;
  }

  /**
   * Writes `message` for the open session. ssh2's Server has no public call for any of them (a Session only closes
   * through the channel acceptExec returns, which sends CHANNEL_SUCCESS first), so this uses ssh2 1.17's own
   * `_protocol` with the session's recipient id (as closeUnanswered does); test code only.
   */
  private sendOnSession(message: SessionMessage): void {
    const { protocol, recipient } = this.sessionProtocol();
    if (message === 'channel_close') {
      protocol.channelClose(recipient);
      this.note({ event: 'channel_closed' });
    } else if (message === 'channel_failure') {
      protocol.channelFailure(recipient);
      this.note({ event: 'channel_failure_sent' });
    } else {
      protocol.channelSuccess(recipient);
      this.note({ event: 'channel_success_sent' });
    }
  }

  private sessionProtocol(): { protocol: SessionProtocol; recipient: number } {
    const opened = this.opened;
    if (opened === undefined) throw new Error('no session is open');
    const protocol = (opened.client as unknown as { _protocol: SessionProtocol })._protocol;
    const recipient = (opened.session as unknown as { _chanInfo: { outgoing: { id: number } } })._chanInfo.outgoing.id;
    return { protocol, recipient };
  }

  /** Destroys every raw socket now (the client sees its connection end, no SSH message first). */
  dropConnections(): void {
    for (const socket of this.sockets) socket.destroy();
    this.note({ event: 'socket_destroyed' });
  }

  /** Destroys the raw socket once what was written has gone out (setImmediate after the write). */
  private destroyAfterFlush(): void {
    setImmediate(() => {
      for (const socket of this.sockets) {
        if (socket.writableLength === 0) socket.destroy();
        else socket.once('drain', () => socket.destroy());
      }
      this.note({ event: 'socket_destroyed' });
    });
  }

  /** Resolves when the server has logged `event` (now or later): tests wait on facts, not time. */
  waitFor(event: SshServerLogEntry['event']): Promise<void> {
    if (this.log.some((e) => e.event === event)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ event, resolve }));
  }

  private note(entry: SshServerLogEntry): void {
    this.log.push(entry);
    for (const w of this.waiters.splice(0)) {
      if (w.event === entry.event) w.resolve();
      else this.waiters.push(w);
    }
  }

  private dispatchRows(): number | undefined {
    const n = this.countDispatchRows();
    return n === undefined ? undefined : n - this.dispatchRowsAtStart;
  }

  private countDispatchRows(): number | undefined {
    const row = this.db?.prepare(`SELECT count(*) AS n FROM events WHERE kind = 'DISPATCH_STARTED'`).get() as
      { n: number } | undefined;
    return row?.n;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.db?.close();
    await new Promise<void>((resolve) => this.net.close(() => resolve()));
  }
}
