import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { HttpChannel } from '../channels/http/index.js';
import type { SshChannel } from '../channels/ssh/index.js';
import type { PosternConfig } from '../config/index.js';
import {
  agentToolInputSchemas,
  agentToolReplySchema,
  callWaitMsDefault,
  callWaitMsMax,
  CodedError,
  isCodedError,
  TransitionRefused,
  type ActionState,
  type AgentPeer,
  type AgentRouteList,
  type AgentToolName,
  type Envelope,
  type ErrorCode,
} from '../contract/index.js';
import type { Journal, RequestStore, ResultStore } from '../journal/index.js';
import type {
  AgentBackend,
  CallerStop,
  CallProgress,
  Clock,
  CredentialVault,
  IdSource,
  ResultHandoff,
  ToolAnswer,
} from '../ports/index.js';
import { decisionFacts, progressHeartbeatMsDefault, waitForSettled, watchProgress } from './call-waits.js';
import { actionAnswer, refusal, type ActionAnswerParts } from './agent-answers.js';
import type { ApprovalQueue } from '../queue/approval-queue.js';
import { observePolicyActor } from '../queue/decision-events.js';
import { OpenActions, openActionsPerSessionMax } from './open-actions.js';
import { executeHttpAction } from './execute-http-action.js';
import { executeSshAction } from './execute-ssh-action.js';
import { stateClassification, stateEnvelope } from './state-envelope.js';
import { issueField, issueMessage } from './http-action-request.js';
import {
  committedView,
  expiredEnvelope,
  handoffOf,
  resultExpired,
  resultKeptUntilMs,
  storedAnswerParts,
} from './stored-result.js';

/** How often the sweeper looks for sessions whose process is gone. */
export const sessionSweepMsDefault = 5_000;

export interface AgentBackendDeps {
  readonly journal: Journal;
  readonly results: ResultStore;
  readonly queue: ApprovalQueue;
  readonly config: PosternConfig;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly vault: CredentialVault;
  readonly httpChannel: HttpChannel;
  /** Absent: ssh_exec is refused (UNSUPPORTED_ACTION). */
  readonly sshChannel?: SshChannel;
  readonly logger?: Logger;
  /** Whether the process (pid + kernel start time) still lives; the runtime passes broker/agent's processAlive. */
  readonly processAlive: (pid: number, startTime: string) => boolean;
  readonly sweepMs?: number;
  /** This boot's id (Linux /proc/sys/kernel/random/boot_id); tests pass one. */
  readonly bootId?: string;
  /** Open (undispatched, unclosed) actions per session; default openActionsPerSessionMax. */
  readonly openActionsPerSessionMax?: number;
  /** The route's lookup, asked by the retry engine once an idempotency key's window passed. */
  readonly reconcile?: (actionId: string) => Promise<void>;
  /** Sealed copies of requests a person may retry with the same key (execute-http-action.ts). */
  readonly requests?: RequestStore;
}

export interface RunningAgentBackend extends AgentBackend {
  /** Ends sessions whose process is gone and cancels their undispatched tickets; returns how many. */
  sweep(reason?: 'process_exited' | 'broker_found_gone'): Promise<number>;
  /** Stops the sweeper. */
  close(): void;
}

/**
 * The broker side of the agent socket (ports/agent-backend.ts): sessions per agent process, the six
 * tools, and the caller's wait. A call's `timeout_ms` is how long the CALLER waits, never the
 * channel's timeout: when it passes, the action keeps its place and stays queryable
 * (action_status / fetch_result). Refusals are answers, never throws.
 */
// eslint-disable-next-line max-lines-per-function -- the six tools as closures over sessions and open actions; #17 moves actions out
export async function createAgentBackend(deps: AgentBackendDeps): Promise<RunningAgentBackend> {
  const bootId = deps.bootId ?? readBootId();
  const log = deps.logger;
  const open = new OpenActions(deps.openActionsPerSessionMax ?? openActionsPerSessionMax, (actionId) => {
    const state = deps.journal.getAction(actionId);
    return state === undefined || (state.dispatch_seq === null && state.outcome === null);
  });

  const sweep = async (reason: 'process_exited' | 'broker_found_gone' = 'process_exited'): Promise<number> => {
    let ended = 0;
    for (const s of deps.journal.listSessions({ status: ['pending', 'approved', 'revoked'] })) {
      if (s.ended_at_ms !== null || deps.processAlive(s.pid, s.start_time)) continue;
      await deps.queue.endSession(s.session_id, reason);
      ended += 1;
    }
    return ended;
  };
  /**
   * Handoff reports per action, one after another: two connections' reports (a fetch written on one
   * while the other failed) each decide on the state the previous one left, so neither is lost or doubled.
   */
  const handoffs = new Map<string, Promise<void>>();
  const inTurn = (actionId: string, record: () => Promise<void>): Promise<void> => {
    const turn = (handoffs.get(actionId) ?? Promise.resolve()).then(record);
    const settled = turn.catch(() => undefined);
    handoffs.set(actionId, settled);
    void settled.then(() => {
      if (handoffs.get(actionId) === settled) handoffs.delete(actionId);
    });
    return turn;
  };
  // Sessions a previous run left open whose process is gone: ended before anything else runs.
  await sweep('broker_found_gone');
  const timer = setInterval(() => {
    sweep().catch((error: unknown) => log?.error({ err: error }, 'session sweep failed'));
  }, deps.sweepMs ?? sessionSweepMsDefault);
  timer.unref();

  return {
    sweep,
    close: () => clearInterval(timer),

    async openSession(peer: AgentPeer, client: { name?: string; version?: string }): Promise<{ session_id: string }> {
      const existing = deps.journal.findSessionByProcess(peer.pid, peer.start_time);
      if (existing !== undefined) {
        if (existing.status === 'revoked' || existing.status === 'ended')
          throw new CodedError(
            'SESSION_REVOKED',
            `this process's session was ${existing.status}; a new process gets a new session`,
          );
        // The session record shows each reconnection (a shim after a broker restart, or another connection).
        await deps.journal.appendSession({
          kind: 'SESSION_RECONNECTED',
          action_id: existing.session_id,
          payload: { client_name: clip(client.name ?? null, 200), client_version: clip(client.version ?? null, 100) },
        });
        deps.queue.sessionConnected(existing.session_id);
        return { session_id: existing.session_id };
      }
      const sessionId = sessionIdFor(bootId, peer);
      const started = await deps.journal.tryAppendSession({
        kind: 'SESSION_STARTED',
        action_id: sessionId,
        payload: {
          pid: peer.pid,
          uid: peer.uid,
          start_time: peer.start_time.slice(0, 64),
          ppid: peer.ppid,
          exe: clip(peer.exe, 4096),
          cwd: clip(peer.cwd, 4096),
          parent_exe: clip(peer.parent_exe, 4096),
          client_name: clip(client.name ?? null, 200),
          client_version: clip(client.version ?? null, 100),
        },
      });
      const approved =
        started.ok && deps.config.agents.session_approval === 'observe'
          ? await deps.journal.tryAppendSession({
              kind: 'SESSION_APPROVED',
              action_id: sessionId,
              payload: { actor: observePolicyActor },
            })
          : started;
      if (!approved.ok) {
        // session_exists, session_not_pending: the same process under the same boot maps to the same id, and an earlier record decides.
        const recorded = deps.journal.getSession(sessionId);
        if (recorded === undefined) throw new TransitionRefused(approved.refusal);
        if (recorded.status === 'revoked' || recorded.status === 'ended')
          throw new CodedError('SESSION_REVOKED', `this process's session was ${recorded.status}`);
      }
      deps.queue.sessionConnected(sessionId);
      log?.info({ session_id: sessionId, pid: peer.pid }, 'agent session opened');
      return { session_id: sessionId };
    },

    sessionDisconnected(sessionId: string): void {
      deps.queue.sessionDisconnected(sessionId);
    },

    resultDelivered: (sessionId: string, handoff: ResultHandoff) =>
      inTurn(handoff.action_id, () => markDelivered(deps, sessionId, handoff)),
    resultNotDelivered: (sessionId: string, handoff: ResultHandoff) =>
      inTurn(handoff.action_id, () => noteDeliveryFailed(deps, sessionId, handoff)),

    async call(
      sessionId: string,
      tool: AgentToolName,
      args: unknown,
      signal: AbortSignal,
      onProgress?: (p: CallProgress) => void,
    ): Promise<ToolAnswer> {
      try {
        switch (tool) {
          case 'http_request':
          case 'ssh_exec':
            return withDecision(deps, await actionCall(deps, open, sessionId, tool, args, signal, onProgress));
          case 'action_status':
          case 'fetch_result':
          case 'cancel_action':
            return withDecision(deps, await readCall(deps, sessionId, tool, args, signal));
          case 'list_routes':
            return listRoutes(deps.config);
        }
      } catch (error) {
        if (!isCodedError(error)) throw error;
        const answer = refusal(error.code, error.message, readRefusalRetry(tool, error.code), error.field);
        return tool === 'http_request' || tool === 'ssh_exec' ? answer : readRefusal(answer);
      }
    },
  };
}

/**
 * What the agent may do after a coded refusal of a call. A stored result sealed under an earlier run opens only
 * with the vault unlocked: fetching it again later is the way, not a corrected request.
 */
function readRefusalRetry(tool: AgentToolName, code: ErrorCode): 'never' | 'after_correction' | 'fetch_result' {
  if (code === 'JOURNAL_UNAVAILABLE') return 'never';
  if (tool === 'fetch_result' && code === 'VAULT_LOCKED') return 'fetch_result';
  return 'after_correction';
}

type Ended = { kind: 'done'; answer: ToolAnswer } | { kind: 'timeout' } | { kind: 'stopped'; stop: CallerStop };

/** Starts the executor, then waits for it, the caller's deadline or the caller's stop — whichever first. */
// eslint-disable-next-line max-lines-per-function -- executor vs caller deadline vs caller stop, with cleanup; #17 moves it out
async function actionCall(
  deps: AgentBackendDeps,
  open: OpenActions,
  sessionId: string,
  tool: 'http_request' | 'ssh_exec',
  args: unknown,
  signal: AbortSignal,
  onProgress: ((p: CallProgress) => void) | undefined,
): Promise<ToolAnswer> {
  const session = deps.journal.getSession(sessionId);
  if (session === undefined) return refusal('NOT_FOUND', 'no such session', 'never');
  if (session.status === 'revoked' || session.status === 'ended')
    return refusal('SESSION_REVOKED', `this session was ${session.status}; nothing was accepted`, 'never');
  const { waitMs, rest, problem } = splitWait(tool, args, deps.config.agents.wait_ms_default ?? callWaitMsDefault);
  if (problem !== undefined) return problem;
  if (tool === 'ssh_exec' && deps.sshChannel === undefined)
    return refusal('UNSUPPORTED_ACTION', 'this broker has no SSH channel', 'never', 'host');

  // Refused before admission: nothing is journaled for a call over the bound.
  const running = open.tryBegin(sessionId);
  if (running === undefined) {
    const max = deps.openActionsPerSessionMax ?? openActionsPerSessionMax;
    return refusal(
      'RATE_LIMITED',
      `at most ${max} actions of one session may wait undispatched at once; cancel some or wait for them (action_status)`,
      'backoff',
    );
  }
  let actionId: string | undefined;
  let markAdmitted = (): void => undefined;
  const admitted = new Promise<void>((resolve) => {
    markAdmitted = resolve;
  });
  const ids: IdSource = {
    newActionId: () => {
      actionId = deps.ids.newActionId();
      running.actionId = actionId;
      return actionId;
    },
  };
  // A retry_of call mints no id: the executor names the original once it accepted the retry.
  const onAdmitted = (id: string): void => {
    actionId ??= id;
    running.actionId ??= id;
    markAdmitted();
  };
  const common = {
    ids,
    clock: deps.clock,
    journal: deps.journal,
    results: deps.results,
    vault: deps.vault,
    config: deps.config,
    sessionId,
    queue: deps.queue,
    onAdmitted,
    ...(deps.logger === undefined ? {} : { logger: deps.logger }),
    ...(deps.reconcile === undefined ? {} : { reconcile: deps.reconcile }),
    ...(deps.requests === undefined ? {} : { requests: deps.requests }),
  };
  const executed: Promise<ToolAnswer> =
    tool === 'http_request'
      ? executeHttpAction({ ...common, channel: deps.httpChannel }, rest).then((r) =>
          executedAnswer(deps, r.envelope, r.response === undefined ? {} : { response: r.response }),
        )
      : executeSshAction({ ...common, channel: deps.sshChannel as SshChannel }, rest).then((r) =>
          executedAnswer(deps, r.envelope, r.output === undefined ? {} : { output: r.output }),
        );
  // Once admitted, a thrown error is answered from the record: never a bare refusal, which would
  // tell the agent "not_attempted, fix and resend" about an action that may have been sent.
  const run = executed.catch((error: unknown) => {
    // A retry_of the executor refused before it named the action: a coded refusal, nothing recorded.
    if (actionId === undefined && isCodedError(error)) return retryRefusal(error);
    deps.logger?.error({ err: error, action_id: actionId }, 'action execution failed');
    return recordedAnswer(deps, actionId, error);
  });
  // The executor outlives a caller that stopped waiting: its action counts until it returns.
  run.then(
    () => open.end(sessionId, running),
    () => open.end(sessionId, running),
  );

  let timer: NodeJS.Timeout | undefined;
  let onAbort = (): void => undefined;
  const heartbeatMs = deps.config.agents.progress_heartbeat_ms ?? progressHeartbeatMsDefault;
  const stopProgress =
    onProgress === undefined ? undefined : watchProgress(waitSource(deps), () => actionId, onProgress, heartbeatMs);
  const ended = await Promise.race<Ended>([
    run.then((answer): Ended => ({ kind: 'done', answer })),
    new Promise<Ended>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'timeout' }), waitMs);
      timer.unref();
    }),
    new Promise<Ended>((resolve) => {
      onAbort = () =>
        resolve({ kind: 'stopped', stop: signal.reason === 'disconnected' ? 'disconnected' : 'cancelled' });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }),
  ]).finally(() => {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    stopProgress?.();
  });
  if (ended.kind === 'done') return ended.answer;
  // Admission is one commit away at most; if the executor finished meanwhile, its answer stands.
  const first = await Promise.race([
    admitted.then(() => undefined),
    run.then(
      (answer) => answer,
      () => undefined,
    ),
  ]);
  if (first !== undefined) return first;
  const id = actionId;
  const state = id === undefined ? undefined : deps.journal.getAction(id);
  if (id === undefined || state === undefined) return run;
  try {
    return await callerEnded(deps, id, state, ended, waitMs);
  } catch (error) {
    deps.logger?.error({ err: error, action_id: id }, 'recording the caller event failed');
    return recordedAnswer(deps, id, error);
  }
}

/**
 * The caller's wait passed (DESIGN §3 caller_disposition timed_out). A caller event: it neither closes nor cancels
 * the action, and never cuts the remote operation (the route's or host's own deadline does that).
 * - Before dispatch the answer is the action's place: ticket, lane position and what it waits for, and how to wait
 *   on (action_status with wait_ms). Not an error: nothing failed.
 * - After dispatch, with no recorded result yet, it is an error answer: CALLER_DEADLINE_EXCEEDED, phase
 *   remote_execution, outcome unknown, retry fetch_result (read the result once it is recorded; never resend).
 * - If the outcome was recorded meanwhile, the record answers.
 */
async function callerTimedOut(
  deps: AgentBackendDeps,
  id: string,
  state: ActionState,
  waitMs: number,
): Promise<ToolAnswer> {
  const stage = state.dispatch_seq === null ? 'before_dispatch' : 'remote_execution';
  const after = (await deps.journal.append({ kind: 'CALLER_DEADLINE_EXCEEDED', action_id: id, payload: { stage } }))
    .state;
  const hint = `call action_status {"action_id":"${id}","wait_ms":…} to wait on, or fetch_result once it settled`;
  if (after.outcome !== null && after.recorded) return recordedAnswer(deps, id, new Error('unreachable'));
  if (after.dispatch_seq === null) {
    const position = deps.queue.position(id);
    const waiting = position === null ? 'its turn' : position.text;
    return actionAnswer({
      envelope: stateEnvelope(after, 'timed_out'),
      state: after,
      queue: position,
      note: `(stopped waiting after ${waitMs} ms, ${waiting}; action ${id} keeps its place: ${hint})`,
    });
  }
  const envelope = stateEnvelope(after, 'timed_out');
  const message = `the caller's wait (${waitMs} ms) passed after dispatch; the remote operation continues under its own deadline and its outcome is unknown until recorded: ${hint}`;
  const timedOut = {
    ...envelope,
    effect: envelope.effect ?? 'unknown_effect',
    error: {
      code: 'CALLER_DEADLINE_EXCEEDED' as const,
      phase: 'remote_execution' as const,
      outcome: 'unknown' as const,
      retry: 'fetch_result' as const,
      message,
    },
  };
  return {
    ...actionAnswer({
      envelope: timedOut,
      state: after,
      note: `(stopped waiting after ${waitMs} ms; dispatched, outcome unknown until recorded: ${hint})`,
    }),
    isError: true,
  };
}

/** The queue and the journal as the waits read them. */
function waitSource(deps: AgentBackendDeps): Parameters<typeof watchProgress>[0] {
  return {
    getAction: (id) => deps.journal.getAction(id),
    position: (id) => deps.queue.position(id),
    onChange: (listener) => deps.queue.onChange(listener),
  };
}

/**
 * Adds the recorded decision (who decided, when, a person's reason, the card's expiry) to an action's answer. A
 * rejection's reason is the person's own words to the agent; it is also named in the error's message.
 */
function withDecision(deps: AgentBackendDeps, answer: ToolAnswer): ToolAnswer {
  const structured = answer.structured;
  if ('routes' in structured || structured.invocation_id === null) return answer;
  const decision = decisionFacts(deps.journal.subjectEvents(structured.invocation_id));
  if (decision === undefined) return answer;
  const error = structured.error;
  const said =
    decision.reason !== null &&
    decision.reason !== '' &&
    error !== undefined &&
    (decision.state === 'rejected' || decision.state === 'cancelled');
  const who = decision.by === null ? '' : ` by ${decision.by.kind} ${decision.by.id}`;
  const withReason = said
    ? { ...error, message: `${decision.state}${who}: ${decision.reason ?? ''}`.slice(0, 1000) }
    : error;
  const reply = agentToolReplySchema.parse({
    ...structured,
    ...(withReason === undefined ? {} : { error: withReason }),
    decision,
  });
  return {
    ...answer,
    structured: reply,
    text: said ? `${answer.text} (${decision.state}${who}: ${decision.reason ?? ''})` : answer.text,
  };
}

/** A refused read names no outcome: it says nothing about any action, only that this read was refused. */
function readRefusal(answer: ToolAnswer): ToolAnswer {
  const structured = answer.structured;
  if ('routes' in structured || structured.invocation_id !== null) return answer;
  const { outcome: _none, ...error } = structured.error;
  return { ...answer, structured: agentToolReplySchema.parse({ ...structured, error }) };
}

/**
 * The executor's own answer. When it carries the response (or output) of a committed result it
 * names that result as its handoff, so the socket can report whether the answer reached the caller.
 */
function executedAnswer(
  deps: AgentBackendDeps,
  envelope: Envelope,
  carried: Pick<ActionAnswerParts, 'response' | 'output'>,
): ToolAnswer {
  const state = deps.journal.getAction(envelope.invocation_id);
  const answer = actionAnswer({ envelope, state, ...carried });
  const handoff = carried.response === undefined && carried.output === undefined ? undefined : handoffOf(state);
  return handoff === undefined ? answer : { ...answer, handoff };
}

/** The caller's deadline passed or it stopped waiting: a caller event is recorded; the action stands. */
async function callerEnded(
  deps: AgentBackendDeps,
  id: string,
  state: ActionState,
  ended: Exclude<Ended, { kind: 'done' }>,
  waitMs: number,
): Promise<ToolAnswer> {
  if (ended.kind === 'timeout') return callerTimedOut(deps, id, state, waitMs);
  const after = (await deps.queue.callerStopped(id, ended.stop)) ?? state;
  return actionAnswer({
    envelope: stateEnvelope(after, ended.stop === 'disconnected' ? 'disconnected' : 'canceled'),
    state: after,
    note:
      after.dispatch_seq === null
        ? '(cancelled before dispatch: nothing was sent)'
        : '(the caller stopped waiting after dispatch; the effect is as recorded)',
  });
}

/**
 * The answer for an admitted action whose executor (or caller-event append) threw: its envelope as
 * the journal records it — unknown once DISPATCH_STARTED is durable, committed with the stored
 * result if it was committed — with isError unless a success is recorded. Only an error before
 * admission (nothing journaled, or the journal unreadable) is rethrown, for call() to refuse.
 */
/** A refused retry_of: the request was wrong (after_correction) or no retry is open to it (never). */
function retryRefusal(error: CodedError): ToolAnswer {
  const correctable: readonly string[] = [
    'INVALID_ARGUMENT',
    'INVALID_TARGET',
    'IDEMPOTENCY_MISMATCH',
    'FINGERPRINT_MISMATCH',
    'FORBIDDEN_HEADER',
    'PAYLOAD_LIMIT',
  ];
  return refusal(
    error.code,
    error.message,
    correctable.includes(error.code) ? 'after_correction' : 'never',
    error.field,
  );
}

function recordedAnswer(deps: AgentBackendDeps, actionId: string | undefined, error: unknown): ToolAnswer {
  let state: ActionState | undefined;
  try {
    state = actionId === undefined ? undefined : deps.journal.getAction(actionId);
  } catch {
    state = undefined;
  }
  if (state === undefined) throw error;
  const stored = state.result_id === null ? undefined : deps.results.read(state.result_id);
  const answer = actionAnswer({
    envelope: stateEnvelope(state),
    state,
    queue: deps.queue.position(state.action_id),
    ...(stored === undefined ? {} : storedAnswerParts(state.channel, stored)),
  });
  const succeeded =
    state.recorded && state.code === null && (state.outcome === 'committed' || state.outcome === 'rejected');
  const handoff = stored === undefined ? undefined : handoffOf(state);
  return { ...answer, isError: !succeeded, ...(handoff === undefined ? {} : { handoff }) };
}

/**
 * `timeout_ms` is the caller's wait: checked against the tool's bounds, then removed from what the executor sees
 * (the executor parses the rest with the same tool schema; the operation's deadline is the route's or host's).
 */
function splitWait(
  tool: 'http_request' | 'ssh_exec',
  args: unknown,
  waitMsDefault: number,
): { waitMs: number; rest: unknown; problem?: ToolAnswer } {
  if (typeof args !== 'object' || args === null || Array.isArray(args) || !('timeout_ms' in args))
    return { waitMs: waitMsDefault, rest: args };
  const { timeout_ms: raw, ...rest } = args as Record<string, unknown>;
  const parsed = agentToolInputSchemas[tool].shape.timeout_ms.safeParse(raw);
  if (!parsed.success || parsed.data === undefined) {
    const message = `timeout_ms is a whole number of milliseconds from 1 to ${callWaitMsMax} (how long this call waits; it never cuts the remote operation)`;
    return {
      waitMs: waitMsDefault,
      rest,
      problem: refusal('INVALID_ARGUMENT', message, 'after_correction', 'timeout_ms'),
    };
  }
  return { waitMs: parsed.data, rest };
}

/** action_status, fetch_result, cancel_action: only this session's actions (another's id is NOT_FOUND). */
async function readCall(
  deps: AgentBackendDeps,
  sessionId: string,
  tool: 'action_status' | 'fetch_result' | 'cancel_action',
  args: unknown,
  signal: AbortSignal,
): Promise<ToolAnswer> {
  const parsed = agentToolInputSchemas[tool].safeParse(args);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return readRefusal(refusal('INVALID_ARGUMENT', issueMessage(issue), 'after_correction', issueField(issue)));
  }
  const found = ownAction(deps.journal, sessionId, parsed.data.action_id);
  if (found === undefined)
    return readRefusal(refusal('NOT_FOUND', 'no action with that id is visible to this session', 'never', 'action_id'));
  let state = found;
  const waitMs = tool === 'action_status' ? agentToolInputSchemas.action_status.parse(args).wait_ms : undefined;
  if (waitMs !== undefined && waitMs > 0) {
    // The long-poll: an agent waits for the outcome in chunks shorter than its client's request timeout.
    await waitForSettled(waitSource(deps), state.action_id, waitMs, signal);
    state = deps.journal.getAction(state.action_id) ?? state;
  }
  if (tool === 'cancel_action') {
    const after = (await deps.queue.callerStopped(state.action_id, 'cancelled')) ?? state;
    return actionAnswer({ envelope: stateEnvelope(after), state: after, queue: deps.queue.position(after.action_id) });
  }
  if (tool === 'action_status') {
    // Once the result was handed over, an earlier failed handoff is history: the status is the result's.
    const view =
      state.stage === 'result_delivered'
        ? committedView(state, () => deps.journal.subjectEvents(state.action_id))
        : state;
    return actionAnswer({ envelope: stateEnvelope(view), state: view, queue: deps.queue.position(state.action_id) });
  }
  return fetchResult(deps, state);
}

/**
 * fetch_result: a read of the result store; it can never cause a remote call, and it journals
 * nothing itself — RESULT_DELIVERED follows when the socket reports the answer written
 * (resultDelivered). A result past its retention is RESULT_EXPIRED, checked before its bytes are
 * read; the action is never run again to recreate it.
 */
function fetchResult(deps: AgentBackendDeps, state: ActionState): ToolAnswer {
  const head = state.result_id === null ? undefined : deps.results.head(state.result_id);
  if (head === undefined) {
    return {
      ...actionAnswer({ envelope: stateEnvelope(state), state, queue: deps.queue.position(state.action_id) }),
      isError: true,
    };
  }
  const retention = deps.config.results.retention_seconds;
  if (resultExpired(head, retention, deps.clock.nowMs())) {
    const keptUntil = new Date(resultKeptUntilMs(head, retention)).toISOString();
    return {
      ...actionAnswer({
        envelope: expiredEnvelope(stateEnvelope(state), state),
        state,
        note: `(result kept until ${keptUntil}; never re-executed)`,
      }),
      isError: true,
    };
  }
  const stored = deps.results.read(head.result_id);
  if (stored === undefined) return { ...actionAnswer({ envelope: stateEnvelope(state), state }), isError: true };
  const view = committedView(state, () => deps.journal.subjectEvents(state.action_id));
  const handoff = handoffOf(state);
  return {
    ...actionAnswer({ envelope: stateEnvelope(view), state: view, ...storedAnswerParts(state.channel, stored) }),
    ...(handoff === undefined ? {} : { handoff }),
  };
}

/**
 * The answer carrying a committed result was written completely to the caller's connection (the
 * strongest acknowledgement MCP allows): RESULT_DELIVERED, once per action. A handoff of a result
 * that is not the action's committed one (cannot happen today) or of another session's action is ignored.
 */
async function markDelivered(deps: AgentBackendDeps, sessionId: string, handoff: ResultHandoff): Promise<void> {
  const state = ownAction(deps.journal, sessionId, handoff.action_id);
  if (state === undefined || state.result_id !== handoff.result_id || state.stage === 'result_delivered') return;
  await deps.journal.append({ kind: 'RESULT_DELIVERED', action_id: state.action_id, payload: {} });
}

/**
 * The answer carrying a committed result never reached the caller's connection: the outcome stays
 * what the remote said (committed or rejected, same effect) and a delivery note says so — phase
 * result_delivery, RESULT_DELIVERY_FAILED, retry fetch_result — beside CALLER_DISCONNECTED, in one
 * commit. Once per action, and never after the result was delivered on another connection.
 */
async function noteDeliveryFailed(deps: AgentBackendDeps, sessionId: string, handoff: ResultHandoff): Promise<void> {
  const state = ownAction(deps.journal, sessionId, handoff.action_id);
  if (state === undefined || state.result_id !== handoff.result_id) return;
  if (state.stage === 'result_delivered' || state.phase === 'result_delivery' || !state.recorded) return;
  const recorded = stateClassification(state);
  if (recorded === undefined || (recorded.outcome !== 'committed' && recorded.outcome !== 'rejected')) return;
  // A backoff delay belongs to the remote's answer, not to fetching it again.
  const { retry_after_ms: _delay, ...c } = recorded;
  await deps.journal.appendBatch([
    { kind: 'CALLER_DISCONNECTED', action_id: state.action_id, payload: { stage: 'result_delivery' } },
    {
      kind: 'OUTCOME_RECORDED',
      action_id: state.action_id,
      payload: {},
      // As classifyOutcome words a delivery failure: the remote's outcome, effect and source stand.
      classification: {
        ...c,
        phase: 'result_delivery',
        retry: 'fetch_result',
        code: 'RESULT_DELIVERY_FAILED',
        outcome_basis: 'result_recorded_delivery_failed',
      },
    },
  ]);
}

function ownAction(journal: Journal, sessionId: string, actionId: string): ActionState | undefined {
  if (!actionId.startsWith('act_')) return undefined;
  const state = journal.getAction(actionId);
  return state?.session_id === sessionId ? state : undefined;
}

function listRoutes(config: PosternConfig): ToolAnswer {
  const structured: AgentRouteList = {
    routes: [...config.routes.values()].map((r) => ({
      name: r.name,
      methods: [...r.methods],
      approval: r.approval,
      idempotency_contract: r.idempotency !== undefined,
      base_path: r.base_path,
    })),
    ssh_hosts: [...config.sshHosts.values()].map((h) => ({ name: h.name, approval: h.approval })),
  };
  return {
    isError: false,
    structured,
    text: `${structured.routes.length} route(s), ${structured.ssh_hosts.length} SSH host entr${structured.ssh_hosts.length === 1 ? 'y' : 'ies'}`,
  };
}

/** `ses_` + a digest of (boot id, pid, start time): the same process maps to the same session. */
export function sessionIdFor(bootId: string, peer: Pick<AgentPeer, 'pid' | 'start_time'>): string {
  return `ses_${createHash('sha256').update(`${bootId}\n${peer.pid}\n${peer.start_time}`).digest('hex').slice(0, 32)}`;
}

function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().slice(0, 64);
  } catch {
    return 'no-boot-id';
  }
}

function clip(value: string | null, charsMax: number): string | null {
  return value === null ? null : value.slice(0, charsMax);
}
