import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { open, readlink, stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import {
  actorLabel,
  allowlistEntriesMax,
  allowlistSubjectId,
  CodedError,
  isCodedError,
  type Actor,
  type ActionState,
  type AllowlistEntry,
  type BrokerApi,
  type CodeSigning,
  type OperatorInput,
  type SessionState,
} from '../contract/index.js';
import {
  actionScopeOf,
  allowlistActorId,
  allowlistWithheld,
  darwinToolOutputBytesMax,
  foldAllowlist,
  isUnscoped,
  listeningTcpInodes,
  matchesExecutable,
  parseCodesignDetails,
  parseLsofExecutable,
  parsePsStart,
  sameSigning,
  scopedMatch,
  socketInode,
  tcpListenerWithheld,
  unscopedMatch,
  type ExecutableIdentity,
  type Parsed,
} from '../core/index.js';
import type { Journal } from '../journal/index.js';
import type { OperatorActor } from '../ports/index.js';

/** The journal reads one subject's events a page at a time (512); the allowlist's history must fit in one. */
const allowlistEventsMax = 512;
/** Adds stop here so removals always fit in the page. */
const allowlistAddsUntil = 448;
/** An executable larger than this is not hashed (no agent binary comes near it). */
export const executableBytesMax = 1024 * 2 ** 20;
/** Sessions whose hashed executable the allowlist keeps for scoped entries; the oldest go first. */
const sessionsRememberedMax = 4_096;
/**
 * Open descriptors read for the listener check (one readlink each, ~2 µs): a process holding more is withheld (fails
 * closed) rather than making every gate of its session slow.
 */
export const openFilesCheckedMax = 16_384;
/** How long one run of codesign / ps / lsof may take (codesign --verify reads the whole file). */
const darwinToolTimeoutMs = 30_000;

/**
 * The macOS tools the broker runs (absolute paths, never looked up on PATH). Tests pass scripted stand-ins
 * (broker/testing/fake-codesign.ts); production always uses the system's own.
 */
export interface DarwinTools {
  readonly codesign: string;
  readonly ps: string;
  readonly lsof: string;
}
export const systemDarwinTools: DarwinTools = { codesign: '/usr/bin/codesign', ps: '/bin/ps', lsof: '/usr/sbin/lsof' };

export interface ProcessAllowlistOptions {
  readonly journal: Journal;
  /** Whether the process (pid + kernel start time) still lives (broker/agent's processAlive). */
  readonly processAlive: (pid: number, startTime: string) => boolean;
  readonly logger?: Logger;
  /** Where /proc is (tests point it elsewhere). */
  readonly procRoot?: string;
  /** Which OS's way of naming a process's executable (default: this one's). */
  readonly platform?: NodeJS.Platform;
  /** darwin: the tools that name, date and sign-check an executable (default: systemDarwinTools). */
  readonly darwinTools?: DarwinTools;
  /**
   * The project's addon (native/peercred, as broker/host's loadNativeAddon answers it): its `listeningTcpInodes` answers
   * the listener check by one sock_diag query when the process shares the broker's network namespace. Absent, an Error
   * (it did not load) or without that function (an older build): the /proc tables are read, as they are for a process
   * in another namespace. Tests pass stand-ins.
   */
  readonly addon?: ListenerAddon | Error;
}

/** The part of the addon the listener check uses, as loose as a missing or older build may be. */
export interface ListenerAddon {
  readonly listeningTcpInodes?: unknown;
}

type AddInput = OperatorInput<'allowlist.add'>;
/** A process as the kernel named it: a session's record, or a peer about to become one. */
type ProcessRef = Pick<SessionState, 'pid' | 'start_time' | 'exe'>;
/**
 * What `identify` found: the hashed executable (and the unscoped entry approving its session), or — an entry matched
 * but the process was started with an injection variable or is traced — only why the allowlist does not apply.
 */
export type Identified =
  | { readonly identity: ExecutableIdentity; readonly entry?: AllowlistEntry; readonly withheld?: undefined }
  | { readonly withheld: string; readonly identity?: undefined; readonly entry?: undefined };

/**
 * The process allowlist (docs/queue.md): executables, by absolute path + sha256, whose processes skip the session
 * card — an unscoped entry approves the session at open, a scoped one approves that process's session-mode calls on
 * the routes/hosts it names. Per-call cards always stay. The entries are the journal's ALLOWLIST_* events of one
 * subject, folded at start and after each unlock (an earlier run's payloads open only with the vault unlocked; until
 * then nothing matches). The hash is always the broker's: of /proc/<pid>/exe for a process, of the file for a path.
 */
export class ProcessAllowlist {
  private entries = new Map<string, AllowlistEntry>();
  private state: 'ready' | 'sealed' = 'sealed';
  private eventCount = 0;
  /** session id → the executable its process ran when the session opened (only when some entry's path matched). */
  private readonly sessions = new Map<string, ExecutableIdentity>();
  /** pid + start time → the image (device, inode) hashed for it (Linux), bounded like `sessions`. */
  private readonly images = new Map<string, RunningImage>();
  /**
   * pid + start time → why a gate withheld the allowlist from that process: it stays withheld for the process's life
   * (an inspector closed or a tracer detached after injecting code leaves the code running). Only dead processes are
   * pruned (past sessionsRememberedMax), so no number of other processes can make one forgotten.
   */
  private readonly withheldAtGate = new Map<string, string>();
  private decisions: Promise<unknown> = Promise.resolve();
  /** Why sock_diag was not used (the addon missing, older or failing), once logged. */
  private sockDiagUnusableLogged = false;
  private readonly procRoot: string;
  private readonly darwin: DarwinTools | undefined;

  constructor(private readonly options: ProcessAllowlistOptions) {
    this.procRoot = options.procRoot ?? '/proc';
    this.darwin =
      (options.platform ?? process.platform) === 'darwin' ? (options.darwinTools ?? systemDarwinTools) : undefined;
    this.reload();
  }

  /** Folds the allowlist's events again (at start, and when an unlock makes earlier runs' payloads readable). */
  reload(): void {
    try {
      const events = this.options.journal.subjectEvents(allowlistSubjectId, allowlistEventsMax);
      if (events.length >= allowlistEventsMax) {
        // More history than one page: matching on part of it could revive a removed entry, so nothing matches.
        this.options.logger?.error({ events: events.length }, 'process allowlist history exceeds its bound');
        this.state = 'sealed';
        return;
      }
      this.entries = foldAllowlist(events);
      this.eventCount = events.length;
      this.state = 'ready';
    } catch (error) {
      if (!isCodedError(error) || error.code !== 'AUDIT_KEY_UNAVAILABLE') throw error;
      this.state = 'sealed';
    }
  }

  list(): BrokerApi['allowlist.list']['output'] {
    return { state: this.state, entries: this.state === 'ready' ? [...this.entries.values()] : [] };
  }

  /**
   * Before a new session is recorded: hashes the process's executable when an entry names its path (no hashing
   * otherwise) and answers its identity with the unscoped entry that approves the session, if one matches. The caller
   * records the session, then `remember`s the identity for scoped entries. When an entry matches but the process was
   * started with a loader or runtime injection variable, is being traced or listens on a TCP port (an inspector; Linux:
   * `withheldFrom`), the answer is
   * only why the allowlist does not apply: no identity to remember, no entry, and the session gets its card.
   */
  async identify(process: ProcessRef): Promise<Identified | undefined> {
    if (this.state !== 'ready' || this.entries.size === 0) return undefined;
    if (this.darwin === undefined && process.exe === null) return undefined;
    const named = (path: string): boolean => [...this.entries.values()].some((e) => e.path === path);
    const identity = await this.processIdentity(process, named).catch((error: unknown) => {
      this.options.logger?.info({ pid: process.pid, err: error }, 'agent executable not hashed');
      return undefined;
    });
    if (identity === undefined) return undefined;
    if (![...this.entries.values()].some((e) => matchesExecutable(e, identity))) return { identity };
    const withheld = this.withheldFrom(process);
    if (withheld !== undefined) {
      this.options.logger?.warn({ pid: process.pid, why: withheld }, 'process allowlist not applied');
      return { withheld };
    }
    const entry = unscopedMatch(this.entries.values(), identity);
    return entry === undefined ? { identity } : { identity, entry };
  }

  /** The executable a session's process runs, kept for its scoped entries (bounded: the oldest go first). */
  remember(sessionId: string, identity: ExecutableIdentity): void {
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, identity);
    const oldest = this.sessions.keys().next();
    if (this.sessions.size > sessionsRememberedMax && oldest.done !== true) this.sessions.delete(oldest.value);
  }

  /** The session ended: its executable is forgotten. */
  sessionEnded(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /**
   * For the queue's gate: the actor approving a session-mode call of a pending session whose executable a scoped
   * entry covers for the call's route or host; undefined leaves the call to its session card.
   */
  readonly approvalFor = (state: ActionState): Actor | undefined => {
    if (this.state !== 'ready' || state.approval !== 'session' || state.session_id === null) return undefined;
    const identity = this.sessions.get(state.session_id);
    if (identity === undefined) return undefined;
    const entry = scopedMatch(this.entries.values(), identity, actionScopeOf(state.target));
    if (entry === undefined) return undefined;
    const session = this.options.journal.getSession(state.session_id);
    if (session === undefined || !this.processUnchanged(session) || this.withheldNow(session)) return undefined;
    return { kind: 'policy', id: allowlistActorId(entry.entry_id) };
  };

  /** What `add` would record, hashed the same way now: the card shows it, and the add must find the same bytes. */
  async preview(input: OperatorInput<'allowlist.preview'>): Promise<BrokerApi['allowlist.preview']['output']> {
    const exe =
      'session_id' in input ? await this.sessionIdentity(input.session_id) : await this.fileIdentity(input.path);
    return { path: exe.path, sha256: exe.sha256, signing: exe.signing ?? null };
  }

  /**
   * A person's decision: an entry for a session's executable or a path, hashed by the broker now, and only when that
   * hash is the one the person was shown — bytes rewritten after the look are refused, never recorded.
   */
  add(input: AddInput, actor: OperatorActor): Promise<BrokerApi['allowlist.add']['output']> {
    return this.serially(async () => {
      this.requireReady();
      const identity = 'session_id' in input ? await this.sessionIdentity(input.session_id) : undefined;
      const exe = identity ?? (await this.fileIdentity('path' in input ? input.path : ''));
      if (exe.sha256 !== input.expected_sha256)
        throw unverifiable('expected_sha256', 'the executable hashes differently now than when it was shown');
      const routes = [...new Set(input.routes ?? [])].sort();
      const hosts = [...new Set(input.hosts ?? [])].sort();
      const signing = exe.signing ?? null;
      const same = [...this.entries.values()].find(
        (e) =>
          e.path === exe.path &&
          e.sha256 === exe.sha256 &&
          sameSigning(e.signing, signing) &&
          sameList(e.routes, routes) &&
          sameList(e.hosts, hosts),
      );
      if (same !== undefined) return { entry: same, added: false };
      if (this.entries.size >= allowlistEntriesMax || this.eventCount >= allowlistAddsUntil)
        throw new CodedError('PAYLOAD_LIMIT', 'the process allowlist is full: remove an entry first', {
          field: 'path',
        });
      const entryId = `alw_${randomBytes(8).toString('hex')}`;
      const fromSession = 'session_id' in input ? { from_session: input.session_id } : {};
      const signed = signing === null ? {} : { signing };
      const payload = {
        entry_id: entryId,
        path: exe.path,
        sha256: exe.sha256,
        routes,
        hosts,
        actor,
        ...fromSession,
        ...signed,
      };
      const appended = await this.options.journal.appendConfig({
        kind: 'ALLOWLIST_ENTRY_ADDED',
        action_id: allowlistSubjectId,
        payload,
      });
      const entry: AllowlistEntry = {
        ...payload,
        added_by: actorLabel(actor),
        added_at_ms: appended.event.at_ms,
        from_session: 'session_id' in input ? input.session_id : null,
        signing,
      };
      this.entries.set(entryId, entry);
      this.eventCount += 1;
      if (identity !== undefined && 'session_id' in input) this.remember(input.session_id, identity);
      return { entry, added: true };
    });
  }

  /** A person's decision: the entry stops matching for sessions opened (and calls gated) after it. */
  remove(
    input: OperatorInput<'allowlist.remove'>,
    actor: OperatorActor,
  ): Promise<BrokerApi['allowlist.remove']['output']> {
    return this.serially(async () => {
      this.requireReady();
      if (!this.entries.has(input.entry_id))
        throw new CodedError('NOT_FOUND', 'no allowlist entry with that id is in force', { field: 'entry_id' });
      await this.options.journal.appendConfig({
        kind: 'ALLOWLIST_ENTRY_REMOVED',
        action_id: allowlistSubjectId,
        payload: { entry_id: input.entry_id, actor },
      });
      this.entries.delete(input.entry_id);
      this.eventCount += 1;
      return { entry_id: input.entry_id, removed: true as const };
    });
  }

  /** Whether an unscoped entry in force is this one (for a session approved from the card after adding it). */
  isUnscopedEntry(entryId: string): boolean {
    const entry = this.entries.get(entryId);
    return entry !== undefined && isUnscoped(entry);
  }

  private requireReady(): void {
    if (this.state !== 'ready')
      throw new CodedError('VAULT_LOCKED', 'earlier allowlist entries are sealed: unlock the vault first', {
        field: 'entry_id',
      });
  }

  private async sessionIdentity(sessionId: string): Promise<ExecutableIdentity> {
    const session = this.options.journal.getSession(sessionId);
    if (session === undefined) throw new CodedError('NOT_FOUND', 'no session with that id', { field: 'session_id' });
    try {
      const identity = await this.processIdentity(session);
      if (identity === undefined) throw unverifiable('session_id', "the session's executable is not known");
      return identity;
    } catch (error) {
      if (isCodedError(error)) throw error;
      throw unverifiable('session_id', "the session's executable could not be read");
    }
  }

  /**
   * The running process's executable, or undefined when `wanted` (is some entry's path) says no — then nothing is
   * hashed. Linux: /proc/<pid>/exe. darwin: lsof, bracketed by ps start times (darwinProcessIdentity).
   */
  private async processIdentity(
    process: ProcessRef,
    wanted: (path: string) => boolean = () => true,
  ): Promise<ExecutableIdentity | undefined> {
    if (this.darwin !== undefined) return this.darwinProcessIdentity(process, this.darwin, wanted);
    if (process.exe === null || !wanted(process.exe)) return undefined;
    return this.linuxProcessIdentity(process, process.exe);
  }

  /**
   * Hashed through /proc/<pid>/exe (the image the process runs, even if its path was replaced since), only while that
   * pid is still the session's process (start time) and still names the executable the session recorded — a process
   * that exec'd another program is refused.
   */
  private async linuxProcessIdentity(process: ProcessRef, exe: string): Promise<ExecutableIdentity> {
    const { pid, start_time: startTime } = process;
    const alive = (): boolean => this.options.processAlive(pid, startTime);
    const link = `${this.procRoot}/${pid}/exe`;
    if (!alive()) throw unverifiable('session_id', "the session's process is gone");
    const { sha256, image } = await hashImage(link);
    if ((await readlink(link)) !== exe || !alive())
      throw unverifiable('session_id', "the session's process is gone or runs another program now");
    this.images.delete(imageKey(process));
    this.images.set(imageKey(process), image);
    const oldest = this.images.keys().next();
    if (this.images.size > sessionsRememberedMax && oldest.done !== true) this.images.delete(oldest.value);
    return { path: exe, sha256 };
  }

  /**
   * Whether an approved session still speaks for its process at a gate (Linux; elsewhere there is nothing to read, and
   * it answers true): the process (pid + start time) lives and runs the executable its session recorded — and, where
   * the allowlist hashed it, the very image it hashed. A process that exec'd another program on its connection, or a
   * connection kept by another process after the session's process exited, is no longer what was approved: the queue
   * then shows the call's card instead of applying the session's approval (or a scoped entry's). A session the
   * allowlist approved is also no longer what was approved once `withheldFrom` has a reason (a tracer attached since,
   * an inspector opened by a signal), and stays so for the process's life (`withheldNow`).
   */
  readonly processUnchanged = (session: Pick<SessionState, 'pid' | 'start_time' | 'exe' | 'approved_by'>): boolean => {
    if ((this.options.platform ?? process.platform) !== 'linux') return true;
    if (!this.options.processAlive(session.pid, session.start_time)) return false;
    // The allowlist's approval holds only while nothing rewrites the process: a tracer attached, or an inspector
    // opened, since it was identified gets cards (a person's approval was a person's look at the card, and stands).
    if (session.approved_by?.startsWith(`policy:${allowlistActorId('')}`) === true && this.withheldNow(session))
      return false;
    if (session.exe === null) return true;
    const link = `${this.procRoot}/${session.pid}/exe`;
    try {
      // An executable replaced on disk since (an upgrade) reads "… (deleted)": the same running image, not an exec.
      if (readlinkSync(link).replace(/ \(deleted\)$/, '') !== session.exe) return false;
      const image = this.images.get(imageKey(session));
      if (image === undefined) return true;
      const now = statSync(link, { bigint: true });
      return now.dev === image.dev && now.ino === image.ino;
    } catch {
      return false;
    }
  };

  /**
   * Linux: why the allowlist must not apply to this process now (allowlistWithheld over its /proc/<pid>/environ and
   * /proc/<pid>/status, then `tcpListener`), read while the pid is still the session's process; a file unreadable, or
   * the process gone meanwhile, is a reason too (fail closed). Elsewhere (no /proc) nothing is read: undefined.
   */
  private withheldFrom(process: Pick<SessionState, 'pid' | 'start_time'>): string | undefined {
    if (this.darwin !== undefined) return undefined;
    let environ: string;
    let status: string;
    try {
      environ = readFileSync(`${this.procRoot}/${process.pid}/environ`, 'latin1');
      status = readFileSync(`${this.procRoot}/${process.pid}/status`, 'latin1');
    } catch {
      return 'its environment or status could not be read';
    }
    const listener = this.tcpListener(process.pid);
    if (!this.options.processAlive(process.pid, process.start_time)) return 'the process is gone';
    return allowlistWithheld(environ, status) ?? listener;
  }

  /**
   * Linux: whether the process owns a listening TCP socket — node's inspector, opened by `kill -USR1`, is one
   * (tcpListenerWithheld). The socket inodes of /proc/<pid>/fd are matched against the listening sockets of the
   * process's network namespace: by the addon's sock_diag query (`sockDiagListeners`, only the kernel's listening hash
   * is walked) when that namespace is the broker's own, else the LISTEN rows of /proc/<pid>/net/tcp and tcp6 (every
   * connection of the namespace is walked). A process with no socket open costs only the descriptor links; a
   * descriptor closed while they are read is skipped; anything else unreadable (or tcp6 unparsable: it is absent only
   * on a kernel without IPv6) withholds it.
   */
  private tcpListener(pid: number): string | undefined {
    const unreadable = 'its open sockets could not be read';
    const fdDir = `${this.procRoot}/${pid}/fd`;
    const sockets = new Set<string>();
    try {
      const descriptors = readdirSync(fdDir);
      if (descriptors.length > openFilesCheckedMax) return 'it has more open files than the broker checks';
      for (const fd of descriptors) {
        const inode = socketInode(readlinkIfOpen(`${fdDir}/${fd}`));
        if (inode !== undefined) sockets.add(inode);
      }
    } catch {
      return unreadable;
    }
    if (sockets.size === 0) return undefined;
    const listeners = this.sockDiagListeners(pid);
    if (listeners !== undefined) {
      for (const inode of sockets) if (listeners.has(inode)) return tcpListenerWithheld;
      return undefined;
    }
    for (const table of ['tcp', 'tcp6']) {
      let text: string;
      try {
        text = readFileSync(`${this.procRoot}/${pid}/net/${table}`, 'latin1');
      } catch (error) {
        if (table === 'tcp6' && (error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        return unreadable;
      }
      const listening = listeningTcpInodes(text);
      if (listening === undefined) return unreadable;
      for (const inode of sockets) if (listening.has(inode)) return tcpListenerWithheld;
    }
    return undefined;
  }

  /**
   * The inodes of the listening TCP sockets of the broker's network namespace by the addon (sock_diag), when the
   * process is in that namespace (its /proc/<pid>/ns/net names the same one as the broker's /proc/self/ns/net);
   * undefined — the caller reads the process's /proc tables — when it is in another one, either link is unreadable, or
   * the addon is missing, older, fails or answers something else than inode numbers.
   */
  private sockDiagListeners(pid: number): ReadonlySet<string> | undefined {
    const addon = this.options.addon;
    const query = addon instanceof Error ? undefined : addon?.listeningTcpInodes;
    if (typeof query !== 'function') {
      if (addon !== undefined) this.sockDiagUnusable(addon instanceof Error ? 'did not load' : 'is an older build');
      return undefined;
    }
    try {
      if (readlinkSync(`${this.procRoot}/${pid}/ns/net`) !== readlinkSync(`${this.procRoot}/self/ns/net`))
        return undefined;
    } catch {
      return undefined;
    }
    let inodes: unknown;
    try {
      inodes = (query as () => unknown)();
    } catch (error) {
      this.sockDiagUnusable(`failed (${codeOf(error)})`);
      return undefined;
    }
    if (!Array.isArray(inodes) || !inodes.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
      this.sockDiagUnusable('gave an unusable answer');
      return undefined;
    }
    return new Set(inodes.map(String));
  }

  private sockDiagUnusable(why: string): void {
    if (this.sockDiagUnusableLogged) return;
    this.sockDiagUnusableLogged = true;
    this.options.logger?.info(
      { why },
      `the addon's listeningTcpInodes ${why}: the listener check reads /proc/<pid>/net/tcp and tcp6`,
    );
  }

  /**
   * withheldFrom at a gate, logged once per call it turns into a card, and remembered for the process's life: once a
   * gate saw a reason, the allowlist does not apply to that process again, however clean it reads later.
   */
  private withheldNow(session: Pick<SessionState, 'pid' | 'start_time'>): boolean {
    const key = imageKey(session);
    const withheld = this.withheldAtGate.get(key) ?? this.withheldFrom(session);
    if (withheld === undefined) return false;
    this.options.logger?.warn({ pid: session.pid, why: withheld }, 'process allowlist not applied at the gate');
    if (!this.withheldAtGate.has(key)) {
      this.withheldAtGate.set(key, withheld);
      if (this.withheldAtGate.size > sessionsRememberedMax) this.forgetDeadWithheld();
    }
    return true;
  }

  /** Drops the gate's withheld processes that have exited (pid + start time no longer alive). */
  private forgetDeadWithheld(): void {
    for (const key of [...this.withheldAtGate.keys()]) {
      const colon = key.indexOf(':');
      if (!this.options.processAlive(Number(key.slice(0, colon)), key.slice(colon + 1)))
        this.withheldAtGate.delete(key);
    }
  }

  /**
   * macOS has no /proc and Node cannot call proc_pidpath, so the path is lsof's first `txt` file: the kernel's name
   * for the vnode of the image mapped first. `ps -o comm=` was rejected: on macOS it prints argv[0], which the process
   * chose (`exec -a /Applications/Trusted …`) and is often not a path at all. The file at that path is hashed and
   * sign-checked (not the running image: a file replaced after exec is what is judged), and the process's start time
   * (`ps -o lstart=`, whole seconds) must read the same before lsof and after the hash, so a pid that died and was
   * reused meanwhile is refused. The session's own start time is `unavailable` on macOS (peer-identity reads /proc),
   * so between the session's open and this check only `processAlive` (signal 0) speaks for the pid.
   */
  private async darwinProcessIdentity(
    process: ProcessRef,
    tools: DarwinTools,
    wanted: (path: string) => boolean,
  ): Promise<ExecutableIdentity | undefined> {
    const { pid, start_time: startTime } = process;
    const gone = (): CodedError =>
      unverifiable('session_id', "the session's process is gone or runs another program now");
    if (!this.options.processAlive(pid, startTime)) throw gone();
    const started = await darwinStart(tools, pid);
    const lsof = await runTool(
      tools.lsof,
      ['-n', '-P', '-w', '-a', '-p', String(pid), '-d', 'txt', '-F', 'n'],
      'session_id',
    );
    const exe = parsedOr(parseLsofExecutable(lsof.stdout, pid), 'session_id');
    if (process.exe !== null && process.exe !== exe) throw gone();
    if (!wanted(exe)) return undefined;
    const identity = await darwinFileIdentity(tools, exe, 'session_id');
    if ((await darwinStart(tools, pid)) !== started || !this.options.processAlive(pid, startTime)) throw gone();
    return identity;
  }

  private async fileIdentity(file: string): Promise<ExecutableIdentity> {
    try {
      if (this.darwin !== undefined) return await darwinFileIdentity(this.darwin, file, 'path');
      return { path: file, sha256: await hashFile(file) };
    } catch (error) {
      if (isCodedError(error)) throw error;
      throw unverifiable('path', 'the file could not be read');
    }
  }

  /** Adds and removes one at a time, so each reads the entries the previous one left. */
  private serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.decisions.then(work, work);
    this.decisions = next.catch(() => undefined);
    return next;
  }
}

/** sha256 of a regular file's bytes (streamed, bounded), as `sha256:<hex>`. */
export async function hashFile(file: string): Promise<string> {
  return (await hashImage(file)).sha256;
}

/** hashFile, with the device and inode of the very file whose bytes were hashed (one descriptor for both). */
async function hashImage(file: string): Promise<{ sha256: string; image: RunningImage }> {
  const handle = await open(file, 'r');
  try {
    const stat = await handle.stat({ bigint: true });
    if (!stat.isFile()) throw unverifiable('path', 'not a regular file');
    if (stat.size > executableBytesMax) throw unverifiable('path', 'the file is larger than an executable may be');
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of createReadStream('', { fd: handle.fd, autoClose: false }) as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > executableBytesMax) throw unverifiable('path', 'the file grew past the bound while it was read');
      hash.update(chunk);
    }
    return { sha256: `sha256:${hash.digest('hex')}`, image: { dev: stat.dev, ino: stat.ino } };
  } finally {
    await handle.close();
  }
}

function unverifiable(field: string, why: string): CodedError {
  return new CodedError('EXECUTABLE_UNVERIFIABLE', `${why}; no allowlist entry was added`, { field });
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * darwin: the file's sha256 and code-signing identity, read while the file stays the same (device, inode, size and
 * mtime equal before the hash and after codesign), so the hash and the identity describe the same bytes.
 */
async function darwinFileIdentity(tools: DarwinTools, file: string, field: string): Promise<ExecutableIdentity> {
  const before = await fileStamp(file);
  const sha256 = await hashFile(file);
  const signing = await codeSigningOf(tools, file, field);
  if ((await fileStamp(file)) !== before) throw unverifiable(field, 'the file changed while it was read');
  return { path: file, sha256, signing };
}

/**
 * The identity codesign reads from the file: none when `--verify --strict` fails (unsigned, tampered, bad
 * resources); otherwise `-d --verbose=2` must succeed and parse (parseCodesignDetails) or nothing is added or matched.
 */
async function codeSigningOf(tools: DarwinTools, file: string, field: string): Promise<CodeSigning | null> {
  const verify = await runTool(tools.codesign, ['--verify', '--strict', file], field);
  if (verify.code !== 0) return null;
  const details = await runTool(tools.codesign, ['-d', '--verbose=2', file], field);
  if (details.code !== 0) throw unverifiable(field, 'codesign could not display a signature it verified');
  return parsedOr(parseCodesignDetails(details.stderr), field);
}

/** The process's start time by ps; no such process is refused. */
async function darwinStart(tools: DarwinTools, pid: number): Promise<string> {
  const ps = await runTool(tools.ps, ['-o', 'lstart=', '-p', String(pid)], 'session_id');
  const started = parsedOr(parsePsStart(ps.code === 0 ? ps.stdout : ''), 'session_id');
  if (started === undefined) throw unverifiable('session_id', "the session's process is gone");
  return started;
}

function parsedOr<T>(parsed: Parsed<T>, field: string): T {
  if (!parsed.ok) throw unverifiable(field, parsed.why);
  return parsed.value;
}

async function fileStamp(file: string): Promise<string> {
  const s = await stat(file, { bigint: true });
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
}

interface ToolRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs one macOS tool by absolute path with a fixed environment (C locale, so ps prints lstart in one format) and
 * bounds on time and output. A non-zero exit is an answer (codesign --verify failing is evidence); a tool that cannot
 * start, times out or prints past the bound is refused.
 */
function runTool(file: string, args: readonly string[], field: string): Promise<ToolRun> {
  const env = { LC_ALL: 'C', PATH: '/usr/bin:/bin:/usr/sbin:/sbin' };
  const limits = { env, timeout: darwinToolTimeoutMs, maxBuffer: darwinToolOutputBytesMax, encoding: 'utf8' as const };
  return new Promise((resolve, reject) => {
    execFile(file, [...args], limits, (error, stdout, stderr) => {
      if (error === null) return resolve({ code: 0, stdout, stderr });
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'number' && error.killed !== true) return resolve({ code, stdout, stderr });
      reject(unverifiable(field, `${file.slice(file.lastIndexOf('/') + 1)} could not be run`));
    });
  });
}

/** The running image of a process: the device and inode /proc/<pid>/exe leads to. */
interface RunningImage {
  readonly dev: bigint;
  readonly ino: bigint;
}

/** A /proc/<pid>/fd link's target; '' for a descriptor closed since the directory was read. */
function readlinkIfOpen(link: string): string {
  try {
    return readlinkSync(link);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw error;
  }
}

/** An error's code (bounded), never its message. */
function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code.slice(0, 64) : 'no code';
}

function imageKey(process: Pick<SessionState, 'pid' | 'start_time'>): string {
  return `${process.pid}:${process.start_time}`;
}
