import { createHash } from 'node:crypto';
import type { SshChannel, SshChannelReport } from '../channels/ssh/index.js';
import type { SshHostSettings } from '../config/index.js';
import {
  errorCodeMeanings,
  isCodedError,
  type ActionState,
  type ApprovalMode,
  type Classification,
  type NewEvent,
} from '../contract/index.js';
import { classifyOutcome, sshReportEvidence, type LocalGate } from '../core/index.js';
import type { CredentialInfo } from '../ports/index.js';
import { agentParse, issueField, issueMessage, unparsedFingerprint } from './http-action-request.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import { sshActionRequestSchema, sshRequestFingerprint } from './ssh-action-request.js';
import { sshCommandPolicy } from './ssh-command-policy.js';
import { runRecorded } from './record-broker-error.js';
import { startAuthorization } from './authorize-credential.js';
import { credentialBinding, credentialChanged, type BoundCredential } from './credential-binding.js';
import {
  type ExecutorDeps,
  acceptedEvent,
  closedFacts,
  recordCallerCancelled,
  refusalFacts,
  settleOnlyAttempt,
  logRecorded,
  recordAccepted,
  vaultRefusal,
} from './record-refusal.js';
import { buildSshEnvelope } from './ssh-envelope.js';
import { sshCardPreview } from '../queue/card-preview.js';
import { secretParts, secretScrubber, type ScrubResult, type SecretScrubber } from './secret-scrubber.js';
import { authorizationRefusal, closedBeforeDispatch } from './journal-failure.js';
import { settle, type SettleAnswers } from './settle.js';
import { recordingIdOf } from '../journal/index.js';
import { buildCast, type RecordingInput } from './ssh-recording.js';

export interface SshActionDeps extends ExecutorDeps {
  readonly channel: SshChannel;
}

/** The command's output as the caller receives it: capped, flagged, with total counts. */
export interface SshActionOutput {
  readonly exit_status?: number;
  readonly exit_signal?: string;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
  readonly truncated: boolean;
  /** False when the stream broke after the exit report: some output may be missing. */
  readonly output_complete: boolean;
  readonly digest: string;
  /** The scrubber replaced something in stdout or stderr. */
  readonly redacted: boolean;
}

export interface SshActionResult {
  readonly envelope: ReturnType<typeof buildSshEnvelope>;
  readonly output?: SshActionOutput;
}

/**
 * Drives one SSH command from admission to a recorded outcome: ACTION_ACCEPTED →
 * PREFLIGHT_VALIDATED | PREFLIGHT_FAILED → its turn in the queue (card, decision, lane order) →
 * CREDENTIAL_AUTHORIZED → the channel
 * (SETUP_ATTEMPT_FAILED / DISPATCH_STARTED, REQUEST_SENT, REMOTE_RESPONSE_STARTED, EXIT_*,
 * OUTPUT_RECEIVED, CHANNEL_CLOSED, CONNECTION_LOST) → result rows with RESULT_COMMITTED (one transaction), or
 * OUTCOME_RECORDED. Classification is broker/core's. `cancel` is the caller's cancellation.
 */
export async function executeSshAction(
  deps: SshActionDeps,
  input: unknown,
  cancel?: AbortSignal,
): Promise<SshActionResult> {
  const actionId = deps.ids.newActionId();
  return runRecorded(deps, actionId, () => admitAndRun(deps, actionId, input, cancel));
}

/**
 * The steps of ARCHITECTURE.md's "Life of one action", in order: admit (ACTION_ACCEPTED with PREFLIGHT_VALIDATED, or
 * a refusal), wait for turn (the queue), then authorize → dispatch → record → answer (authorizeAndRun). A command
 * is never retried by the broker.
 */
async function admitAndRun(
  deps: SshActionDeps,
  actionId: string,
  input: unknown,
  cancel: AbortSignal | undefined,
): Promise<SshActionResult> {
  const admitted = await admit(deps, actionId, input, cancel);
  if (admitted.kind === 'refused') return admitted.result;
  const closed = await waitForTurn(deps, admitted.bound);
  if (closed !== undefined) return closed;
  return authorizeAndRun(deps, admitted.bound);
}

type Admitted = { kind: 'refused'; result: SshActionResult } | { kind: 'admitted'; bound: Bound };

/**
 * Admission: ACTION_ACCEPTED and PREFLIGHT_VALIDATED in one commit, or ACTION_ACCEPTED and the refusal (a malformed
 * request, an unknown host entry, a command validation refuses).
 */
async function admit(
  deps: SshActionDeps,
  actionId: string,
  input: unknown,
  cancel: AbortSignal | undefined,
): Promise<Admitted> {
  const parsed = sshActionRequestSchema.safeParse(input, agentParse);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const fingerprint = unparsedFingerprint(input);
    await accept(deps, actionId, { target: 'host:(invalid)', fingerprint, lane: null, approval: 'none' });
    const gate = { kind: 'validation', code: 'INVALID_ARGUMENT', field: issueField(issue) } as const;
    const message = `the request is malformed: ${issueMessage(issue)}`;
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, gate, message) };
  }
  const request = parsed.data;
  const fingerprint = sshRequestFingerprint(request);
  const host = deps.config.sshHosts.get(request.host);
  if (host === undefined) {
    await accept(deps, actionId, { target: 'host:(unknown)', fingerprint, lane: null, approval: 'none' });
    const gate = { kind: 'validation', code: 'INVALID_TARGET', field: 'host' } as const;
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, gate, 'no such host entry') };
  }
  const policy = sshCommandPolicy(host, request.command);
  // The command itself may hold anything; the target names only the entry and the command's digest.
  const admission: Admission = {
    target: `host:${host.name} exec ${fingerprint}`,
    fingerprint,
    lane: policy.lane,
    approval: policy.approval,
    ...credentialBinding(deps.vault, host.credential),
  };
  const limits = deps.channel.limits;
  const problem = validate(deps, host, request.command, limits);
  if (problem !== undefined) {
    await accept(deps, actionId, admission);
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, problem.gate, problem.message) };
  }
  await deps.journal.appendBatch([
    sshAccepted(deps, actionId, admission),
    { kind: 'PREFLIGHT_VALIDATED', action_id: actionId, payload: {} },
  ]);
  deps.onAdmitted?.(actionId);
  const timeoutMs = host.timeout_ms ?? operationTimeoutMsDefault;
  const credential = admission.credential;
  return {
    kind: 'admitted',
    bound: { actionId, host, command: request.command, fingerprint, timeoutMs, cancel, credential },
  };
}

/** Waits for the command's turn in the queue (card, decision, lane order): the closure's answer if it was closed. */
async function waitForTurn(deps: SshActionDeps, b: Bound): Promise<SshActionResult | undefined> {
  const turn = await deps.queue.awaitTurn(b.actionId, sshCardPreview(b.host, b.command));
  return turn.kind === 'closed' ? { envelope: closedEnvelope(turn.state, b.fingerprint) } : undefined;
}

interface Admission {
  target: string;
  fingerprint: string;
  lane: string | null;
  approval: ApprovalMode;
  /** The host's credential (id + version) as bound at admission. */
  credential?: BoundCredential;
}

async function accept(deps: SshActionDeps, actionId: string, a: Admission): Promise<void> {
  await recordAccepted(deps, sshAccepted(deps, actionId, a));
}

function sshAccepted(deps: SshActionDeps, actionId: string, a: Admission): NewEvent {
  // A command is never assumed idempotent (no declared command contract yet).
  return acceptedEvent(deps, actionId, a.lane, {
    channel: 'ssh',
    target: a.target,
    request_fingerprint: a.fingerprint,
    approval: a.approval,
    idempotent: false,
    ...(a.credential === undefined ? {} : { credential: a.credential }),
  });
}

/** Validation before any secret is touched or any host resolved. */
function validate(
  deps: SshActionDeps,
  host: SshHostSettings,
  command: string,
  limits: SshChannel['limits'],
): { gate: LocalGate; message: string } | undefined {
  if (deps.vault.state() !== 'uninitialized' && deps.vault.describe(host.credential) === undefined) {
    // The credential name comes from configuration and may itself be sensitive: never echoed.
    return {
      gate: { kind: 'validation', code: 'UNKNOWN_CREDENTIAL', field: 'host' },
      message: 'the host entry names a credential the vault does not hold',
    };
  }
  if (Buffer.byteLength(command, 'utf8') > limits.commandBytesMax) {
    return {
      gate: { kind: 'validation', code: 'PAYLOAD_LIMIT', field: 'command' },
      message: `a command is at most ${limits.commandBytesMax} bytes`,
    };
  }
  if (command.includes('\0'))
    return {
      gate: { kind: 'validation', code: 'INVALID_ARGUMENT', field: 'command' },
      message: 'a command cannot contain NUL',
    };
  return undefined;
}

interface Bound {
  actionId: string;
  host: SshHostSettings;
  command: string;
  fingerprint: string;
  timeoutMs: number;
  cancel: AbortSignal | undefined;
  credential: BoundCredential | undefined;
}

async function authorizeAndRun(deps: SshActionDeps, b: Bound): Promise<SshActionResult> {
  if (deps.vault.state() !== 'unlocked')
    return refuse(deps, b.actionId, b.fingerprint, { kind: 'vault_locked' }, 'the vault is locked');
  const locked = new AbortController();
  const unsubscribe = deps.vault.onLock(() => locked.abort());
  try {
    return await deps.vault.withSecret(b.host.credential, async (secret, info) => {
      if (secret.kind !== 'ssh_key' || info.kind !== 'ssh_key')
        return refuse(
          deps,
          b.actionId,
          b.fingerprint,
          { kind: 'credential_missing' },
          'the host entry needs an ssh_key credential',
        );
      if (!boundTo(info, b.host))
        return refuse(
          deps,
          b.actionId,
          b.fingerprint,
          { kind: 'credential_missing' },
          "the host's credential is not bound to this host entry or its host",
        );
      if (sshRequestFingerprint({ host: b.host.name, command: b.command }) !== b.fingerprint) {
        return refuse(deps, b.actionId, b.fingerprint, { kind: 'fingerprint_mismatch' }, 'the request changed');
      }
      // The key is the one bound at admission: a rotation or a replacement since is not what was approved.
      const changed = credentialChanged(b.credential, info);
      if (changed !== undefined)
        return refuse(deps, b.actionId, b.fingerprint, { kind: 'fingerprint_mismatch' }, changed);
      // A person may have cancelled between the queue's release and here: nothing is even set up.
      const closed = closedBeforeDispatch(deps.journal, b.actionId);
      if (closed !== undefined) return { envelope: closedEnvelope(closed, b.fingerprint) };
      // Nothing runs unrecorded: a recording that cannot be started stops the command here, not_attempted.
      if (!(await startRecording(deps, b.actionId))) {
        const message = 'the session recording could not be started, so the command was not run';
        return refuse(deps, b.actionId, b.fingerprint, { kind: 'recording_unavailable' }, message);
      }
      const closedMeanwhile = await closedWhileStarting(deps, b);
      if (closedMeanwhile !== undefined) return closedMeanwhile;
      const scrubber = secretScrubber(secretParts(secret));
      const recording: RecordingSeal = { attempted: false, written: Promise.resolve() };
      let observed: SshChannelReport | undefined;
      try {
        // Awaited only after the channel ran: FIFO commits make DISPATCH_STARTED durable only after this row.
        const authorized = startAuthorization(deps.journal, b.actionId, {
          credential_id: info.id,
          version_tag: info.version_tag,
          injection_mode: 'ssh_publickey',
          request_fingerprint: b.fingerprint,
        });
        const report = await deps.channel.perform({
          actionId: b.actionId,
          host: channelHost(b.host),
          privateKey: secret.privateKey,
          command: b.command,
          timeoutMs: b.timeoutMs,
          outputBytesMax: b.host.output_bytes_max,
          beforeDispatch: locked.signal,
          ...(b.cancel === undefined ? {} : { cancel: b.cancel }),
          // record() appends the settlement at once (settle.ts): the observations ride in its commit.
          observationsRideWithSettlement: true,
        });
        observed = report;
        // Scrubbed in slices (scrubAsync) here, never between settle's check and the settlement's append (settle.ts).
        const clean = (recording.scrubbed = await scrubbedOutput(report.output, scrubber));
        // A refused authorization (a closure that landed first) made DISPATCH_STARTED impossible too.
        const refusedAs = await authorizationRefusal(deps.journal, b.actionId, authorized);
        if (refusedAs !== undefined) return { envelope: closedEnvelope(refusedAs, b.fingerprint) };
        return await settle(deps.journal, b.actionId, report, sshAnswers(b, report), () =>
          record(deps, b, report, clean, recording),
        );
      } finally {
        // A closure that won, a failed journal or a throw ends the action without its record: the recording is sealed
        // all the same (what the command printed, or the mark that no exec request was sent), never left open.
        if (!recording.attempted) sealRecording(deps, b, observed, scrubber, recording);
        // Answered once the recording is written (or its failure logged): a read after the answer finds it sealed.
        await recording.written;
      }
    });
  } catch (error) {
    const refusal = vaultRefusal(error, 'host');
    if (refusal !== undefined) return refuse(deps, b.actionId, b.fingerprint, refusal.gate, refusal.message);
    throw error;
  } finally {
    unsubscribe();
  }
}

/**
 * The recording's start may have waited for the journal's writer thread: a closure (a person's cancellation) that landed
 * meanwhile still wins before anything is set up, and the recording is sealed with the mark that no exec request was sent.
 */
async function closedWhileStarting(deps: SshActionDeps, b: Bound): Promise<SshActionResult | undefined> {
  const closed = closedBeforeDispatch(deps.journal, b.actionId);
  if (closed === undefined) return undefined;
  await finishRecording(deps, b, { output: noOutput(), execAtMs: undefined }, { stdout: false, stderr: false });
  return { envelope: closedEnvelope(closed, b.fingerprint) };
}

/** The host as the channel connects to it. */
function channelHost(host: SshHostSettings): Parameters<SshActionDeps['channel']['perform']>[0]['host'] {
  return { name: host.name, host: host.host, port: host.port, user: host.user, hostKey: host.host_key };
}

function boundTo(info: CredentialInfo, host: SshHostSettings): boolean {
  const names = [host.name, host.host, `${host.host}:${host.port}`, `[${host.host}]:${host.port}`].map((n) =>
    n.toLowerCase(),
  );
  return info.bindings.some((b) => names.includes(b.toLowerCase()));
}

/** The answers settle (settle.ts) gives without this attempt's record: the closure that won, or unknown. */
function sshAnswers(b: Bound, report: SshChannelReport): SettleAnswers<SshActionResult> {
  return {
    closed: (state) => ({ envelope: closedEnvelope(state, b.fingerprint) }),
    unknown: (facts) => ({ envelope: buildSshEnvelope({ ...facts, report, fingerprint: b.fingerprint }) }),
  };
}

async function record(
  deps: SshActionDeps,
  b: Bound,
  observed: SshChannelReport,
  scrubbed: ScrubbedOutput,
  recording: RecordingSeal,
): Promise<SshActionResult> {
  // Everything below — recording, result rows, digest, envelope — sees only the scrubbed output.
  const { report, redacted } = recordScrubbed(deps, b, observed, scrubbed, recording);
  const evidence = sshReportEvidence(report);
  const classification = classifyOutcome(evidence);
  // Caller events are recorded as caller events: they never decide the remote effect.
  if (evidence.caller === 'cancelled') await recordCallerCancelled(deps.journal, b.actionId, report.dispatchStarted);
  const nowMs = deps.clock.nowMs();
  let settled: Parameters<typeof settleOnlyAttempt>[3] = { attempted: report.attempts.length > 0 };
  let output: SshActionOutput | undefined;
  if (report.dispatchStarted && (classification.outcome === 'committed' || classification.outcome === 'rejected')) {
    const o = report.output;
    output = {
      ...(report.exitStatus === undefined ? {} : { exit_status: report.exitStatus }),
      ...(report.exitSignal === undefined ? {} : { exit_signal: report.exitSignal }),
      stdout: o.stdout,
      stderr: o.stderr,
      stdout_bytes: o.stdoutBytes,
      stderr_bytes: o.stderrBytes,
      truncated: o.truncated,
      output_complete: report.outputComplete,
      digest: o.digest,
      redacted,
    };
    settled = {
      result: {
        summary: {
          host: b.host.name,
          ...(report.exitStatus === undefined ? {} : { exit_status: report.exitStatus }),
          ...(report.exitSignal === undefined ? {} : { exit_signal: report.exitSignal }),
          exec_reply: report.execReply ?? null,
          stdout_bytes: o.stdoutBytes,
          stderr_bytes: o.stderrBytes,
          // The body is the kept stdout followed by the kept stderr; this splits it.
          stdout_stored_bytes: o.stdout.length,
          stderr_stored_bytes: o.stderr.length,
          truncated: o.truncated,
          output_complete: report.outputComplete,
          redacted,
          stages: report.stages,
          ...(report.hostKey === undefined ? {} : { host_key: report.hostKey }),
        },
        body: Buffer.concat([o.stdout, o.stderr]),
        total_bytes: o.stdoutBytes + o.stderrBytes,
        truncated: o.truncated,
        digest: o.digest,
        created_at_ms: nowMs,
      },
    };
  }
  const { state, resultId } = await settleOnlyAttempt(deps, b.actionId, classification, settled);
  log(deps, b.actionId, b.host.name, classification);
  const envelope = buildSshEnvelope({
    state,
    classification,
    message: classification.code === null ? '' : errorCodeMeanings[classification.code],
    report,
    ...(resultId === undefined ? {} : { resultId }),
    fingerprint: b.fingerprint,
  });
  return { envelope, ...(output === undefined ? {} : { output }) };
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded envelope. */
function closedEnvelope(state: ActionState, fingerprint: string): SshActionResult['envelope'] {
  return buildSshEnvelope(closedFacts(state, fingerprint));
}

/** A pre-dispatch refusal (record-refusal.ts), answered with its envelope. */
async function refuse(
  deps: SshActionDeps,
  actionId: string,
  fingerprint: string,
  gate: LocalGate,
  message: string,
): Promise<SshActionResult> {
  return { envelope: buildSshEnvelope(await refusalFacts(deps, 'ssh', actionId, { gate, message, fingerprint })) };
}

function log(deps: SshActionDeps, actionId: string, host: string | undefined, c: Classification): void {
  // Only ids and closed-set values: never commands, output or credential names.
  logRecorded(deps.logger, { action_id: actionId, host }, c, 'ssh action recorded');
}

interface ScrubbedOutput {
  readonly output: SshChannelReport['output'];
  readonly redacted: RecordingInput['redacted'];
}

/**
 * The output as the caller receives it: stdout and stderr scrubbed of every secret part (the remote never saw the
 * private key, but a host may print key material it holds), and, when anything was redacted, the digest taken over
 * the delivered bytes — a digest of the unscrubbed output would be a guessing oracle for what was redacted.
 */
async function scrubbedOutput(o: SshChannelReport['output'], scrubber: SecretScrubber): Promise<ScrubbedOutput> {
  // In slices (scrubAsync): a host printing a megabyte of binary does not stall every other caller. The caller runs
  // this before settle, never between settle's check of the held observations and the settlement's append (settle.ts).
  return outputOf(o, await scrubber.scrubAsync(o.stdout), await scrubber.scrubAsync(o.stderr));
}

/** scrubbedOutput at once, for the one path that has no scrubbed output: the scrub itself threw. */
function scrubbedOutputSync(o: SshChannelReport['output'], scrubber: SecretScrubber): ScrubbedOutput {
  return outputOf(o, scrubber.scrub(o.stdout), scrubber.scrub(o.stderr));
}

function outputOf(o: SshChannelReport['output'], stdout: ScrubResult, stderr: ScrubResult): ScrubbedOutput {
  const redacted = { stdout: stdout.redacted, stderr: stderr.redacted };
  if (!stdout.redacted && !stderr.redacted) return { output: o, redacted };
  const digest = `sha256:${createHash('sha256').update(stdout.bytes).update(stderr.bytes).digest('hex')}`;
  return { output: { ...o, stdout: stdout.bytes, stderr: stderr.bytes, digest }, redacted };
}

/** The report with its output scrubbed (and whether anything was), after sealing the recording built from it. */
function recordScrubbed(
  deps: SshActionDeps,
  b: Bound,
  observed: SshChannelReport,
  scrubbed: ScrubbedOutput,
  recording: RecordingSeal,
): { report: SshChannelReport; redacted: boolean } {
  const report: SshChannelReport = { ...observed, output: scrubbed.output };
  recording.attempted = true;
  // Posted, not awaited: nothing may wait between settle's check and the settlement's append (settle.ts). The journal
  // commits the settlement after this write (Journal.writeBeside), and the answer waits for it (authorizeAndRun).
  recording.written = finishRecording(deps, b, report, scrubbed.redacted);
  return { report, redacted: scrubbed.redacted.stdout || scrubbed.redacted.stderr };
}

/** Whether this action's recording was sealed (or its sealing failed and was logged): once only. */
interface RecordingSeal {
  attempted: boolean;
  /** The seal's write: settles once written or its failure logged (never rejects). */
  written: Promise<void>;
  /** The output once scrubbed (before settle), so a recording sealed without the record need not scrub it again. */
  scrubbed?: ScrubbedOutput;
}

/**
 * Seals the recording of an action that ended without its record: from the scrubbed output the channel reported, or,
 * when the channel never reported (it threw), with no output. Either way a recording never stays open for a command
 * that was never sent; buildCast marks one whose exec request was not sent.
 */
function sealRecording(
  deps: SshActionDeps,
  b: Bound,
  observed: SshChannelReport | undefined,
  scrubber: SecretScrubber,
  recording: RecordingSeal,
): void {
  recording.attempted = true;
  if (observed !== undefined) {
    const scrubbed = recording.scrubbed ?? scrubbedOutputSync(observed.output, scrubber);
    recording.written = finishRecording(deps, b, { ...observed, output: scrubbed.output }, scrubbed.redacted);
    return;
  }
  // No report: the channel threw, perhaps after the exec request was written, so the mark must not say it never was.
  const none = { output: noOutput(), execAtMs: undefined };
  recording.written = finishRecording(deps, b, none, { stdout: false, stderr: false }, true);
}

/** No output: a recording of a command that printed nothing, or was never sent. */
function noOutput(): SshChannelReport['output'] {
  return {
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    stdoutBytes: 0,
    stderrBytes: 0,
    truncated: false,
    digest: '',
    marks: [],
  };
}

/** The open recording row, written before the exec request; false when the store refused it (logged, no detail). */
async function startRecording(deps: SshActionDeps, actionId: string): Promise<boolean> {
  try {
    await deps.results.recordings.start(actionId, deps.clock.nowMs());
    return true;
  } catch (error) {
    deps.logger?.error({ action_id: actionId, code: errorCodeOf(error) }, 'ssh recording could not be started');
    return false;
  }
}

/**
 * Seals the recording built from the delivered output. After exec a failure to build or store it cannot undo the
 * command: it is logged and the recording stays open (RECORDING_INCOMPLETE when read, purged a retention after the
 * command ended), and the action's result is still recorded. Either way the store forgets it as running. The cast is
 * built and sealed on this turn; the promise settles once it is written or its failure logged, and never rejects.
 */
function finishRecording(
  deps: SshActionDeps,
  b: Bound,
  report: Pick<SshChannelReport, 'output' | 'execAtMs'> &
    Partial<Pick<SshChannelReport, 'outputComplete' | 'execReply'>>,
  redacted: RecordingInput['redacted'],
  unreported = false,
): Promise<void> {
  const o = report.output;
  const recordingId = recordingIdOf(b.actionId);
  const failed = (error: unknown): void => {
    // finish forgets it before anything can fail; a cast that could not be built never reached it.
    void deps.results.recordings.forget(recordingId, deps.clock.nowMs());
    // The broker stopped before the command ended (its store closes before the cut): no failure, and the record says so.
    if (errorCodeOf(error) === 'SHUTTING_DOWN') {
      deps.logger?.info({ action_id: b.actionId }, 'ssh recording left open: the broker stopped before it was sealed');
      return;
    }
    deps.logger?.error({ action_id: b.actionId, code: errorCodeOf(error) }, 'ssh recording could not be finished');
  };
  try {
    const cast = buildCast({
      actionId: b.actionId,
      hostName: b.host.name,
      execAtMs: report.execAtMs,
      unreported,
      // A refused exec request ran nothing, so no output can be missing; otherwise a session that did not end cleanly.
      outputIncomplete: report.outputComplete === false && report.execReply !== 'failure',
      stdout: o.stdout,
      stderr: o.stderr,
      marks: o.marks,
      redacted,
      truncated: o.truncated,
      receivedBytes: o.stdoutBytes + o.stderrBytes,
    });
    return deps.results.recordings.finish(recordingId, cast, o.truncated, deps.clock.nowMs()).catch(failed);
  } catch (error) {
    failed(error);
    return Promise.resolve();
  }
}

function errorCodeOf(error: unknown): string {
  return isCodedError(error) ? error.code : 'INTERNAL';
}
