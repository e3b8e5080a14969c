import path from 'node:path';
import pino, { type Logger } from 'pino';
import { processAlive, startAgentSocket } from '../agent/index.js';
import { HttpChannel } from '../channels/http/index.js';
import { McpUpstreams, type McpOAuth } from '../channels/mcp/index.js';
import { SshChannel } from '../channels/ssh/index.js';
import {
  CodedError,
  configSubjectId,
  credentialRequestTtlSecondsDefault,
  isCodedError,
  secretInputFields,
  type BrokerApi,
  type BrokerStatus,
  type IntegrityAnchorReport,
} from '../contract/index.js';
import { vaultAutoLockMinutesDefault, type PosternConfig } from '../config/index.js';
import {
  Journal,
  journalFileName,
  logHoldsWords,
  RequestStore,
  ResultStore,
  type ActionRowRefuted,
  type JournalOpenOptions,
  type WriterThreadStartFailure,
} from '../journal/index.js';
import {
  createRandomIdSource,
  systemClock,
  type AgentBackend,
  type Clock,
  type CredentialVault,
  type DispatchGate,
  type VaultKeyProtection,
  type VaultKeyProtector,
} from '../ports/index.js';
import { foldMetrics } from '../core/index.js';
import {
  closeUnsentRecordings,
  createAgentBackend,
  createAutomaticReconcile,
  createReconciler,
  CredentialRequests,
  mcpSecrets,
  planReconcile,
  requireKeptRequest,
  retryKeptRequest,
  withServerSecrets,
} from '../actions/index.js';
import { mcpServerSpec } from '../actions/execute-mcp-action.js';
import { ProcessAllowlist } from '../actions/process-allowlist.js';
import { secretScrubber } from '../actions/secret-scrubber.js';
import { ApprovalQueue } from '../queue/index.js';
import { openVault, type KdfStrength, type Vault } from '../vault/index.js';
import { createAgentDescendantGuard } from './agent-descendant-guard.js';
import { createChangeFeed, topicsOfKinds, type ChangeFeed } from './change-feed.js';
import { integrityAnchorGate, type IntegrityAnchorGate } from './integrity-anchor.js';
import { loadConfigIntegrity, type ConfigIntegrity, type ConfigTrust } from './config-integrity.js';
import { startControlSocket } from './control-socket.js';
import { createPassphraseSource, type PassphraseSource } from './control-proof.js';
import { lockDataDir } from './data-dir-lock.js';
import { loadNativeAddon } from './native-addon.js';
import type { OperatorBroker } from './operator-broker.js';
import { createAllowlistOperator } from './operator-allowlist.js';
import { createCredentialRequestOperator } from './operator-credential-requests.js';
import { createMcpOAuthOperator, createUpstreamOAuth } from './operator-mcp-oauth.js';
import { createOperatorHandlers } from './operator-handlers.js';
import { createOperatorReads } from './operator-reads.js';
import { readActionRecording } from './action-recording.js';
import { createOperatorVault } from './operator-vault.js';
import { startResultPurge } from './result-purge.js';
import { announceVaultLocks, warnMissingCredentials } from './vault-announcements.js';
import { confirmSessionsBehind } from './session-confirmer.js';

export interface BrokerRuntimeOptions {
  dataDir: string;
  mode: BrokerStatus['mode'];
  version: string;
  startedAtMs: number;
  clock?: Clock;
  /**
   * Unlock the vault at start (`--passphrase-file`); a wrong passphrase fails the start. The caller zeroes it. A broker
   * cannot ask a terminal, so this passphrase came from a file any process of the user can read: given it, the control
   * socket takes no passphrase as a person's proof for the whole run (control-proof.ts).
   */
  vaultPassphrase?: Uint8Array;
  /** Vault idle lock overriding postern.yaml `vault.auto_lock_minutes` (default 15 min, 0 = never); Argon2id cost ('min' in tests only). */
  vaultIdleLockMs?: number;
  vaultKdf?: KdfStrength;
  /** The desktop's safeStorage wrap around the vault key, and whether to apply or remove it (broker/vault, docs/vault.md). */
  vaultKeyProtector?: VaultKeyProtector;
  vaultKeyProtection?: VaultKeyProtection;
  /** `--config FILE`; defaults to <dataDir>/postern.yaml (absent file: no routes). */
  configFile?: string;
  /** Structured log sink (default: pino on stderr at POSTERN_LOG_LEVEL, else warn). */
  logger?: Logger;
  /**
   * Tests only: a lower bound on the rows one `actions.list` search page examines (default and ceiling
   * actionListScanRowsMax), so an end-to-end test reaches "Search older" without seeding 10,000 actions.
   */
  actionListScanRowsMax?: number;
  /**
   * Tests only: JournalOpenOptions.writerThreadNativeBinding (a native module that does not load makes the writer
   * thread's start fail, as a broken install's would).
   */
  journalWriterThreadNativeBinding?: string;
}

/** The running broker as its hosts (CLI daemon, Electron main) see it. */
export interface BrokerRuntime {
  readonly broker: OperatorBroker;
  /** The broker's health now (the operator API's `status`, synchronously). */
  status(): BrokerStatus;
  readonly journal: Journal;
  /** The journal as channels see it: observations and the durable dispatch boundary. */
  readonly gate: DispatchGate;
  /** The credential vault (vault.sqlite beside the journal); `postern vault unlock` reaches it through control.sock. */
  readonly vault: Vault;
  /**
   * Whether this run's vault passphrase was read from a file (at start, or by a later `vault unlock --passphrase-file`):
   * then no passphrase proves a person, on the control socket or in the operator UI (control-proof.ts, web-proof.ts).
   */
  readonly passphraseSource: PassphraseSource;
  /**
   * The configuration in force (none if the file is absent): the one a person last accepted. Live: a change a person
   * accepts (or edits) while it is verified swaps in at once (live-config.ts), so read it where it is used.
   */
  readonly config: PosternConfig;
  /** Whether `config` may run (config-integrity.ts): `untrusted` refuses every route and host until a person accepts one. */
  configTrust(): ConfigTrust;
  /** Where agents connect (MCP over a 0600 Unix socket in a 0700 directory). */
  readonly agentSocketPath: string;
  /** Notices (position and topics, no data) after every journal commit and vault lock/unlock: operator surfaces push, not poll. */
  readonly changes: Pick<ChangeFeed, 'subscribe'>;
  /**
   * Stops intake only: the control socket closes; the agent socket stops accepting connections and answers every new
   * call on the ones open SHUTTING_DOWN, while the calls already running keep their connection for their answer; the
   * queue releases no further ticket (one waiting for a person, or for its turn, stays undispatched) and starts no
   * retry. Actions already released run on (a host drains them before `close`, shutdown-sequence.ts). Idempotent.
   */
  stopIntake(): Promise<void>;
  /** Actions released to their executors (on their way or dispatched) whose executor has not settled yet. */
  inFlight(): number;
  /**
   * Stops intake (agent socket, control socket), then closes the queue, vault and journal; last, what is still in
   * flight on the HTTP and SSH channels is cut (its record stays as the closed journal has it; the next start's
   * recovery closes it: unknown after dispatch), so the process waits for no remote.
   */
  close(): Promise<void>;
}

/**
 * THE seam where the broker's parts are composed for a data directory. Both composition roots
 * (`postern daemon` / `postern start` in broker/cli, and app/main) call only this. The data
 * directory's kernel lock comes first and is released last; opening the journal runs its
 * migrations, the integrity anchor's check, then recovery, before anything else can append; the
 * agent socket opens only after the queue has rebuilt its lanes from the journal, and the control
 * socket last.
 */
// eslint-disable-next-line max-lines-per-function -- the composition order and its unwinding on failure read as one sequence, by design
export async function createBrokerRuntime(options: BrokerRuntimeOptions): Promise<BrokerRuntime> {
  // Before anything else touches the data directory: recovery, the vault and the sockets' stale-file
  // rule are only safe in the one process that holds it (data-dir-lock.ts). A second broker stops here.
  const lock = lockDataDir(options.dataDir);
  let config: PosternConfig;
  let integrity: ConfigIntegrity;
  let journal: Journal;
  let anchorGate: IntegrityAnchorGate;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? brokerLogger();
  try {
    // A bad configuration refuses the start (CONFIG_INVALID naming the field) before anything opens.
    // What is in force is the last configuration a person accepted, not whatever the file says now. `config` is the
    // live view: everything below holds it, never a copy, so a change applied later reaches each new admission.
    integrity = loadConfigIntegrity({
      dataDir: options.dataDir,
      clock,
      logger,
      ...(options.configFile === undefined ? {} : { file: options.configFile }),
    });
    config = integrity.config;
    // The integrity anchor is judged inside the open, after migrations and before recovery (read-only, no vault): a
    // journal that disagrees with its signed anchor (rolled back, forged, tail missing) is recovered without claiming
    // not_attempted for what it left open, since it may lack a DISPATCH_STARTED it once held (integrity-anchor.ts).
    anchorGate = integrityAnchorGate({ dataDir: options.dataDir, clock, logger });
    journal = await openJournal(options, clock, anchorGate.judgeBeforeRecovery, logger);
  } catch (error) {
    lock.release();
    throw error;
  }
  // Run in reverse: the lock is released after everything else has closed.
  // After the journal closed (nothing more can be dispatched or recorded), what is still in flight is cut: set below.
  let cutInFlight = (): void => undefined;
  const closers: Array<() => Promise<void> | void> = [() => lock.release(), () => cutInFlight(), () => journal.close()];
  const closeAll = async (): Promise<void> => {
    for (const close of closers.splice(0).reverse()) await close();
  };
  try {
    // Before the vault can unlock (its checkpoint writes the next anchor) and before agents are served: the verdict the
    // open found serves here; a journal the anchor disputes starts quarantined (integrity-anchor.ts).
    const anchor = anchorGate.open(journal);
    // Before this run appends anything: whether the data directory has run before (config-integrity.ts DataDirHistory).
    const earlierRun = earlierRunOf(anchor.report());
    const idleLockMs =
      options.vaultIdleLockMs ?? (config.vault?.auto_lock_minutes ?? vaultAutoLockMinutesDefault) * 60_000;
    const vault = await openVault({
      dataDir: options.dataDir,
      clock,
      idleLockMs,
      kdf: options.vaultKdf,
      keyProtector: options.vaultKeyProtector,
      keyProtection: options.vaultKeyProtection,
    });
    closers.push(() => vault.close());
    // Subscribers are dropped (closed) before the journal and vault they would re-read close.
    const changes = createChangeFeed({ clock });
    closers.push(() => changes.close());
    const seqNow = (): number => journal.stats().last_seq;
    // An unlock lets the journal confirm an earlier run's sessions from their sealed events, which writes nothing: the
    // views that show a session's record (SessionRecordCheck) are told to read again, and what no view asked for is
    // confirmed behind the loop, a notice following once it is.
    let stopConfirming = (): void => {};
    const stopFeeding = [
      journal.onCommit((commit) => changes.publish(topicsOfKinds(commit.kinds), commit.last_seq)),
      vault.onLock(() => {
        stopConfirming();
        changes.publish(['vault'], seqNow());
      }),
      vault.onUnlock(() => {
        changes.publish(['vault', 'sessions', 'approvals', 'credential_requests'], seqNow());
        stopConfirming();
        stopConfirming = confirmSessionsBehind(journal, () => changes.publish(['sessions', 'approvals'], seqNow()));
      }),
    ];
    closers.push(() => {
      stopConfirming();
      stopFeeding.forEach((stop) => stop());
    });
    // Registered before anything else can lock it, so even a lock during start is announced.
    const locks = announceVaultLocks(vault, clock, logger);
    closers.push(warnMissingCredentials(config, vault, logger));
    // The accepted configuration's MAC is checked at every unlock. First use only when a person creates the vault in
    // this broker (operator vault.init), never for a vault that exists: an agent can delete the accepted copy, the
    // journal and its anchor and empty the vault's rows, so no file can vouch that a directory is new. The history (the
    // journal as the start found it, the anchor's verdict) names an earlier run on the card and journals a first-use
    // copy `postern vault init` sealed, at the first unlock of a new directory's first run.
    integrity.attach(vault, {
      earlierRun,
      recordFirstUse: (applied) => {
        journal
          .appendConfig({ kind: 'CONFIG_APPLIED', action_id: configSubjectId(applied.digest), payload: applied })
          .catch((error: unknown) =>
            logger.error(
              { code: isCodedError(error) ? error.code : 'INTERNAL' },
              'the configuration trusted on first use could not be journaled',
            ),
          );
      },
    });
    // Executors see the vault as locked while the accepted configuration is untrusted.
    const dispatchVault = integrity.guardVault(vault);
    // Before unlock: the journal signs checkpoints while unlocked and one last one at each lock.
    journal.attachVault(vault);
    if (options.vaultPassphrase !== undefined) {
      await vault.unlock(options.vaultPassphrase);
      // Before anyone is served: the restart records the unlock wrote from earlier runs' sealed events are durable.
      await journal.unlockRecovered();
    }
    const deferred = journal.deferredRecoveries();
    if (deferred.length > 0)
      logger.warn(
        { count: deferred.length, action_ids: deferred.slice(0, 20) },
        'actions in flight when the broker stopped read in flight until the vault unlocks: the retry their restart record may advise rests on their own sealed events',
      );

    // Results are sealed at rest with the journal's run key (migration 009).
    // Its recordings' writes go through the journal's writer thread while it runs (never its lock on the loop).
    const results = ResultStore.open(path.join(options.dataDir, journalFileName), journal.rowCipher(), {
      role: 'broker',
      journal,
    });
    // Before the cut (closeAll runs in reverse): the recordings of commands still running stay open, alive at the stop.
    closers.push(() => results.close(clock.nowMs()));
    // Before any action runs: recordings an earlier run left open for commands it never sent are sealed as such.
    await sealUnsentRecordings(results, journal, clock, logger);
    // Sealed copies of requests a person may retry with the same key (execute-http-action.ts).
    const requests = RequestStore.open(path.join(options.dataDir, journalFileName), process.platform, journal);
    closers.push(() => requests.close());
    closers.push(
      startResultPurge({ results, requests, clock, retentionMs: config.results.retention_seconds * 1000, logger }).stop,
    );
    const httpChannel = new HttpChannel({ gate: journal });
    closers.push(() => httpChannel.close());
    const sshChannel = new SshChannel({ gate: journal, clock, knownHostsDir: options.dataDir, vault });
    cutInFlight = () => {
      httpChannel.cutInFlight();
      sshChannel.cutInFlight();
    };
    const oauth = createUpstreamOAuth({ dataDir: options.dataDir, vault: dispatchVault, clock, logger });
    const upstreams = startUpstreams({ journal, config, vault, dispatchVault, clock, logger, oauth });
    closers.push(() => upstreams.stopAll('broker_stopping'));
    // Executables whose processes skip the session card: folded from the journal now, and again at each unlock (an
    // earlier run's entries open only then). Registered after attachVault, so the audit keys are unwrapped first.
    const allowlist = new ProcessAllowlist({ journal, processAlive, logger, addon: loadNativeAddon() });
    closers.push(vault.onUnlock(() => allowlist.reload()));
    const queue = ApprovalQueue.open({
      journal,
      clock,
      config,
      logger,
      allowlistApproval: allowlist.approvalFor,
      sessionProcessUnchanged: allowlist.processUnchanged,
    });
    closers.push(() => queue.close());
    // Actions whose rows the log refuted at open are recovered from their own events at an unlock: their lanes move.
    const stopHeld = journal.onHeldRecovered((ids) => queue.heldRecovered(ids));
    closers.push(() => {
      stopHeld();
    });
    // Reconciliation runs the route's lookup as its own action (reconcile-action.ts): a person asks
    // through the operator API; the retry engine asks once a key's window passed (no actor).
    const reconcileDeps = {
      ids: createRandomIdSource(clock),
      clock,
      journal,
      results,
      vault: dispatchVault,
      config,
      channel: httpChannel,
      queue,
      logger,
    };
    const reconciler = createReconciler(reconcileDeps);
    const automaticReconcile = createAutomaticReconcile(reconcileDeps);
    // Agents' credential requests: pending ones (and their expiry) are rebuilt from the journal's plaintext headers.
    const credentialRequests = await CredentialRequests.open({
      journal,
      clock,
      ids: createRandomIdSource(clock),
      config,
      ttlMs: (config.agents.credential_request_ttl_s ?? credentialRequestTtlSecondsDefault) * 1000,
      logger,
    });
    closers.push(() => credentialRequests.close());
    const backend = await createAgentBackend({
      allowlist,
      credentialRequests,
      reconcile: automaticReconcile,
      requests,
      journal,
      results,
      queue,
      config,
      clock,
      ids: createRandomIdSource(clock),
      vault: dispatchVault,
      httpChannel,
      sshChannel,
      upstreams,
      logger,
      processAlive,
    });
    closers.push(() => backend.close());
    // Agents can never approve: the control socket refuses operator calls from their process trees.
    const guard = createAgentDescendantGuard({
      sessions: () => journal.unendedSessions(),
    });
    const agentBackend: AgentBackend = {
      ...backend,
      // An untrusted configuration refuses every route and host before admission (CONFIG_UNTRUSTED).
      // Every argument passes on as given (a wrapper that names them drops any the port adds later).
      call: (...args: Parameters<AgentBackend['call']>) => {
        const tool = args[1];
        const refused = anchor.agentRefusal(tool) ?? integrity.agentRefusal(tool);
        return refused === undefined ? backend.call(...args) : Promise.resolve(refused);
      },
      callUpstream: (...args: Parameters<NonNullable<AgentBackend['callUpstream']>>) => {
        const refused = anchor.agentRefusal('mcp_tool') ?? integrity.agentRefusal('mcp_tool');
        if (refused !== undefined) return Promise.resolve(refused);
        const callUpstream = backend.callUpstream;
        if (callUpstream === undefined) throw new Error('the backend was built with upstreams but cannot call them');
        return callUpstream(...args);
      },
      // The names list_routes gives, and only while list_routes itself would answer.
      targetNames: () =>
        (anchor.agentRefusal('list_routes') ?? integrity.agentRefusal('list_routes')) === undefined
          ? backend.targetNames?.()
          : undefined,
      openSession: async (peer, client) => {
        const opened = await backend.openSession(peer, client);
        guard.remember(opened.session_id, peer.pid, peer.start_time);
        return opened;
      },
    };
    const agentSocket = await startAgentSocket({
      dataDir: options.dataDir,
      backend: agentBackend,
      logger,
      version: options.version,
    });
    const closeAgentSocket = once(() => agentSocket.close());
    closers.push(closeAgentSocket);

    const noCounts = { total: 0, in_flight: 0, unknown: 0 };
    const status = (): BrokerStatus =>
      statusWith(journal.stats().state === 'closed' ? noCounts : journal.actionCounts());
    // The operator's `status`: the counts wait for what is queued without holding the loop (Journal.readCurrent). A
    // journal that closes or fails meanwhile is answered as the synchronous read answers it (nothing is queued then).
    const statusRead = async (): Promise<BrokerStatus> => {
      if (journal.stats().state === 'closed') return statusWith(noCounts);
      const counts = await journal.readCurrent(() => journal.actionCounts()).catch(() => undefined);
      return counts === undefined ? status() : statusWith(counts);
    };
    const statusWith = (counts: BrokerStatus['actions']): BrokerStatus => {
      const stats = journal.stats();
      return {
        version: options.version,
        mode: options.mode,
        started_at_ms: options.startedAtMs,
        data_dir: options.dataDir,
        journal: {
          state: stats.state,
          events: stats.events,
          last_seq: stats.last_seq,
          schema_version: stats.schema_version,
          recovered_at_open: stats.recovered_at_open,
          writer_thread: stats.writer_thread,
        },
        actions: { ...counts },
        // state() first: it may lock an idle vault, and that lock belongs in this answer.
        vault: { state: vault.state(), auto_lock_minutes: Math.ceil(idleLockMs / 60_000), last_lock: locks.lastLock() },
        upstreams: upstreamStatus(config, upstreams),
      };
    };
    // Decisions record who made them: the operator handlers build the actor per call from the
    // surface that received it (operator-handlers.ts), never a fixed "person".
    const broker: OperatorBroker = {
      status: statusRead,
      'approvals.list': () => ({ cards: queue.cards() }),
      'approvals.approve': (input, actor) => queue.approve(input.ticket, actor),
      'approvals.reject': (input, actor) => queue.reject(input.ticket, actor, input.reason),
      'approvals.cancel': (input, actor) =>
        queue.cancel(input.ticket, actor, input.reason ?? 'cancelled by the operator'),
      'approvals.abandon': (input, actor) => queue.abandon(input.ticket, actor, input.reason),
      'actions.attest': (input, actor) =>
        queue.attest(input.action_id, actor, input.outcome, input.effect, input.basis),
      // Both may send (a reconcile probe, a resend): while quarantined nothing is sent, whoever asks (integrity-anchor.ts).
      'actions.reconcile': (input, actor) => {
        anchor.refuseWhileQuarantined();
        return reconciler.reconcile(input.action_id, actor);
      },
      // A person's same-key retry: the kept request resent under the next lease (the click is the fresh decision).
      'actions.retry': async (input, actor) => {
        anchor.refuseWhileQuarantined();
        const result = await retryKeptRequest(
          { ...reconcileDeps, requests, reconcile: automaticReconcile },
          input.action_id,
          actor,
        );
        return retrySummary(journal, input.action_id, result.envelope.evidence.journal_seq);
      },
      // The refusals either would give before sending anything, asked before a person types the passphrase for nothing.
      'actions.precheck': async (input) => {
        anchor.refuseWhileQuarantined();
        if (input.operation === 'reconcile') await planReconcile(reconcileDeps, input.action_id);
        else requireKeptRequest({ requests, clock, journal }, input.action_id);
        return { action_id: input.action_id, operation: input.operation, ok: true as const };
      },
      metrics: async () => foldMetrics(await journal.readCurrent(() => journal.outcomeCounts())),
      'sessions.approve': (input, actor) => queue.approveSession(input.session_id, actor),
      'sessions.revoke': (input, actor) => queue.revokeSession(input.session_id, actor, input.reason),
      ...createOperatorReads(journal, queue, { actionListScanRowsMax: options.actionListScanRowsMax }),
      'integrity.anchor': () => anchor.report(),
      'integrity.readopt': (input, actor) => anchor.readopt(input.code, actor),
      'actions.recording': (input) => readActionRecording(results, journal, input),
      ...createOperatorVault({ dataDir: options.dataDir, vault, config, integrity, journal, clock, logger }),
      ...createCredentialRequestOperator({ requests: credentialRequests, vault, logger }),
      ...createMcpOAuthOperator({ config, oauth, upstreams, logger }),
      ...createAllowlistOperator({ allowlist, queue, logger }),
    };
    const passphraseSource = createPassphraseSource(options.vaultPassphrase !== undefined);
    const control = await startControlSocket({
      dataDir: options.dataDir,
      vault,
      handlers: createOperatorHandlers(broker),
      refuseApiPeer: guard.refuse,
      passphraseSource,
      // The CI opt-out: decisions without a person's proof, recorded as the calling process — honoured only from a
      // configuration whose seal a person's unlock verified, never from one not yet checked.
      unattendedDecisions: () => {
        if (config.operator?.unattended_decisions !== true) return 'off';
        // Not under first use either: with no accepted copy, the file found at start is only the agent's word until a
        // person's unlock seals it (an agent can delete the accepted copy; see docs/config.md).
        return integrity.trust() === 'verified' ? 'on' : 'unverified';
      },
    });
    const closeControl = once(() => control.close());
    closers.push(closeControl);
    const stopIntake = async (): Promise<void> => {
      queue.holdReleases();
      await closeControl();
      await agentSocket.stopAccepting();
    };
    return {
      stopIntake,
      inFlight: () => queue.releasedCount(),
      broker,
      status,
      journal,
      gate: journal,
      vault,
      passphraseSource,
      config,
      configTrust: () => integrity.trust(),
      agentSocketPath: agentSocket.path,
      changes,
      close: closeAll,
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * One warning when the journal's writer thread fails to start: its code and path-free first line, as `status` carries
 * them (`journal.writer_thread`). The journal commits on the loop for the rest of the run and tries no second start.
 */
function warnWriterThreadStartFailure(logger: Logger): (failure: WriterThreadStartFailure) => void {
  return (failure) =>
    logger.warn(
      { code: failure.code, detail: failure.detail },
      'the journal writer thread failed to start; commits run on the event loop for the rest of this run',
    );
}

/** Why the data directory has run before, from the journal and anchor the start found (null: a new directory). */
function earlierRunOf(report: IntegrityAnchorReport): string | null {
  if (report.state === 'quarantined') return `its journal is quarantined (${report.code ?? 'anchor'})`;
  if (report.journal.events > 0) return `its journal holds ${report.journal.events} events`;
  if (report.state === 'ok') return 'its journal has a signed integrity anchor';
  if (report.journal.key_id !== null) return 'its journal holds an audit key from an earlier unlock';
  return null;
}

/**
 * The journal, or one coded line: a start on a full disk (SQLITE_FULL, ENOSPC) or an unreadable
 * file is JOURNAL_UNAVAILABLE naming the cause's code, never a stack trace. Coded errors
 * (MIGRATION_FAILED, JOURNAL_NOT_DURABLE…) pass unchanged.
 */
async function openJournal(
  options: Pick<BrokerRuntimeOptions, 'dataDir' | 'journalWriterThreadNativeBinding'>,
  clock: Clock,
  judgeBeforeRecovery: JournalOpenOptions['judgeBeforeRecovery'],
  logger: Logger,
): Promise<Journal> {
  try {
    // The writer thread starts under load and ends when idle (docs/journal-writer-thread.md). Not inside Electron yet:
    // its waits use Atomics.wait on the main thread, which no test here can run in Electron's main process.
    const writerThread = process.versions['electron'] === undefined ? 'on-demand' : false;
    return await Journal.open({
      dataDir: options.dataDir,
      clock,
      judgeBeforeRecovery,
      writerThread,
      onWriterThreadStartFailure: warnWriterThreadStartFailure(logger),
      onSessionRowRefuted: (report) =>
        logger.warn(
          report,
          report.folds
            ? "a sessions row read at start differs from the session's own events (edited while no broker ran?): the events decide"
            : 'a session of an earlier run does not fold from its events: its approval is not acted on',
        ),
      onActionRowRefuted: (report) => logger.warn(report, actionRowRefutedMessage(report)),
      ...(options.journalWriterThreadNativeBinding === undefined
        ? {}
        : { writerThreadNativeBinding: options.journalWriterThreadNativeBinding }),
    });
  } catch (error) {
    if (isCodedError(error)) throw error;
    const code = (error as { code?: unknown } | null)?.code;
    const detail = error instanceof Error ? error.message.split('\n')[0]?.slice(0, 200) : undefined;
    throw new CodedError(
      'JOURNAL_UNAVAILABLE',
      `the journal could not be opened (${typeof code === 'string' ? code : 'no code'}${detail ? `: ${detail}` : ''})`,
      {
        cause: error,
      },
    );
  }
}

/** What `actions.retry` answers: the action's record after the person's retry (or the record that refused it). */
function retrySummary(journal: Journal, actionId: string, journalSeq: number): BrokerApi['actions.retry']['output'] {
  const state = journal.getAction(actionId);
  if (state === undefined || state.ticket === null || state.outcome === null)
    throw new CodedError('NOT_FOUND', `no action ${actionId}`, { field: 'action_id' });
  const leased =
    state.lease?.open === false && state.lease.generation === state.retry_generation ? state.lease.generation : null;
  return {
    action_id: actionId,
    ticket: state.ticket,
    generation: leased,
    outcome: state.outcome,
    effect: state.effect,
    code: state.code,
    retry: state.retry,
    journal_seq: Math.max(journalSeq, state.last_seq),
  };
}

/** closeUnsentRecordings at start; a failure is logged (code only) and never stops the start. */
async function sealUnsentRecordings(
  results: ResultStore,
  journal: Journal,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  try {
    await closeUnsentRecordings({ recordings: results.recordings, journal, clock, logger });
  } catch (error) {
    logger.error({ code: isCodedError(error) ? error.code : 'INTERNAL' }, 'open ssh recordings could not be sealed');
  }
}

/** Runs `close` at most once; later calls wait for the first. */
function once(close: () => Promise<void> | void): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= Promise.resolve().then(close));
}

/** Structured logs on stderr: ids and closed-set values only (the executors never log targets or secrets). */
function brokerLogger(): Logger {
  return pino(
    { name: 'postern', level: process.env['POSTERN_LOG_LEVEL'] ?? 'warn', redact: secretLogRedaction },
    pino.destination(2),
  );
}

/**
 * Belt and braces: nothing logs an operator call's input, but if a line ever carried one, its
 * secret fields (the contract's `secretInputFields`: a passphrase, a credential's value) are
 * censored at any of the first three levels of the logged object.
 */
export const secretLogRedaction = {
  paths: secretInputFields.flatMap((field) => [field, `*.${field}`, `*.*.${field}`]),
  censor: '[redacted]',
};

// `postern status` reads a data directory without the runtime: data-dir-status.ts (re-exported for existing importers).
export { readDataDirStatus, type DataDirStatus } from './data-dir-status.js';

/**
 * The upstream MCP servers' channel: secrets resolved from the vault at each (re)start of a server (through the
 * integrity guard, so an untrusted configuration starts nothing), every child stopped when the vault locks.
 */
function startUpstreams(o: {
  journal: Journal;
  config: PosternConfig;
  vault: CredentialVault;
  dispatchVault: CredentialVault;
  clock: Clock;
  logger: Logger | undefined;
  oauth: McpOAuth;
}): McpUpstreams {
  const upstreams = new McpUpstreams({
    gate: o.journal,
    clock: o.clock,
    oauth: o.oauth,
    ...(o.logger === undefined ? {} : { logger: o.logger }),
    // A child's stderr gets the scrubber an answer gets (decoded views), not only the channel's exact forms.
    stderrScrubber: (secrets) => {
      const scrubber = secretScrubber(secrets.map((secret) => secret.toString('utf8')));
      return { lookaheadBytes: scrubber.lookaheadBytes, scrub: (line, limit) => scrubber.scrub(line, limit).bytes };
    },
    secretsFor: async (name) => {
      const server = o.config.mcpServers.get(name);
      if (server === undefined) throw new CodedError('INVALID_TARGET', 'no such MCP server', { field: 'name' });
      return withServerSecrets(o.dispatchVault, server, (opened) => mcpSecrets(server, opened));
    },
  });
  o.vault.onLock(() => {
    upstreams
      .stopAll('vault_locked')
      .catch((error: unknown) => o.logger?.error({ err: error }, 'stopping upstream MCP servers failed'));
  });
  return upstreams;
}

/** Every configured upstream server in configuration order: the channel's view, or idle for one never started. */
function upstreamStatus(config: PosternConfig, upstreams: McpUpstreams): NonNullable<BrokerStatus['upstreams']> {
  const known = new Map(upstreams.status().map((s) => [s.server, s]));
  return [...config.mcpServers.values()].map((server) => {
    const s = known.get(server.name);
    return {
      server: server.name,
      transport: server.transport,
      state: s?.state ?? 'idle',
      restarts: s?.restarts ?? 0,
      auth: upstreams.authState(mcpServerSpec(server)),
      ...(s?.pid === undefined ? {} : { pid: s.pid }),
      ...(s?.retryAtMs === undefined ? {} : { retry_at_ms: s.retryAtMs }),
      ...(s?.lastError === undefined
        ? {}
        : { last_error: { code: s.lastError.code, detail: s.lastError.detail, at_ms: s.lastError.atMs } }),
    };
  });
}

/** The warning for a journal's ActionRowRefuted report: what the row said, what the log holds, what happens now. */
export function actionRowRefutedMessage(report: ActionRowRefuted): string {
  if (report.log_holds === 'RETRY_BASIS')
    return `an action in flight when the broker stopped has a row that differs from its own events: ${logHoldsWords.RETRY_BASIS} (edited while no broker ran?): its restart record advises the retry its own events allow`;
  if (report.laned === true)
    return "an action laned from its row at start has events that do not fold (a row inserted, or its run's key lost for good): its lane keeps no retry basis they do not prove (not idempotent, no key, no budget), and `postern audit verify` says what does not authenticate";
  if (report.deferred === true)
    return "an action in flight when the broker stopped has events that do not fold (a row inserted, or its run's key lost for good): closed unknown with retry reconcile, for a person to settle or abandon";
  if (report.events_fold === false)
    return "a held action's own events do not fold (a row inserted, or its run's key lost for good): closed unknown over what the log's headers establish, or left unknown as they do, for a person to settle or abandon";
  const row = report.on_read === true ? "an action's row read now" : "an action's row read at start";
  const then =
    report.on_read === true
      ? 'read from its own events instead, or while they cannot be opened, as what the log establishes (never the row)'
      : 'held, nothing recorded over it and never not_attempted after a dispatch, until its own events decide at the unlock';
  return `${row} differs from the journal's log: ${logHoldsWords[report.log_holds]} (edited while no broker ran?): ${then}`;
}
