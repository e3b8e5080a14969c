import type { McpUpstreams } from '../channels/mcp/index.js';
import type { SshChannel } from '../channels/ssh/index.js';
import {
  agentToolInputSchemas,
  callWaitMsDefault,
  callWaitMsMax,
  isCodedError,
  type ActionState,
  type CodedError,
  type Envelope,
} from '../contract/index.js';
import {
  brokerStopping,
  type CallerStop,
  type CallProgress,
  type IdSource,
  type ToolAnswer,
  type VaultState,
} from '../ports/index.js';
import type { AgentBackendDeps } from './agent-backend-deps.js';
import {
  actionAnswer,
  closedSessionRefusal,
  passesOnceUnlocked,
  refusal,
  type ActionAnswerParts,
} from './agent-answers.js';
import { progressHeartbeatMsDefault, watchProgress } from './call-waits.js';
import { executeHttpAction } from './execute-http-action.js';
import { executeMcpAction } from './execute-mcp-action.js';
import { executeSshAction } from './execute-ssh-action.js';
import type { OpenActions } from './open-actions.js';
import { closedByShutdown } from './record-broker-error.js';
import { stateEnvelope, stoppedAfterDispatch } from './state-envelope.js';
import { handoffOf, storedAnswerParts } from './stored-result.js';

/** An upstream MCP tool, from its agent-visible name `<server>.<tool>`. */
export interface UpstreamTool {
  readonly server: string;
  readonly tool: string;
}
type ActionTool = 'http_request' | 'ssh_exec' | UpstreamTool;
/**
 * How long an admitted action's id waits for a sync other appends ask for before it asks for one (tellRecorded): an
 * action dispatched at once is covered by its own dispatch's sync well within it; one that waits costs one sync.
 */
export const recordedSyncAfterMs = 20;
type Ended =
  | { kind: 'done'; answer: ToolAnswer }
  | { kind: 'timeout' }
  | { kind: 'stopped'; stop: CallerStop }
  | { kind: 'broker_stopping' };

/** The executor once started: its answer, when it admitted the action, and the action's id once it has one. */
interface Started {
  readonly run: Promise<ToolAnswer>;
  readonly admitted: Promise<void>;
  readonly actionId: () => string | undefined;
}

/** What the caller's connection is told while it waits: progress notes, and the action's id once it is durable. */
export interface CallWatch {
  readonly onProgress?: ((p: CallProgress) => void) | undefined;
  readonly onRecorded?: ((actionId: string) => void) | undefined;
}

/**
 * http_request and ssh_exec: starts the executor, then waits for it, the caller's deadline or the caller's stop —
 * whichever first. The caller's wait is never the operation's deadline: when it ends, the action keeps its place.
 */
export async function actionCall(
  deps: AgentBackendDeps,
  open: OpenActions,
  sessionId: string,
  tool: ActionTool,
  args: unknown,
  signal: AbortSignal,
  watch: CallWatch,
): Promise<ToolAnswer> {
  const session = deps.journal.getSession(sessionId);
  if (session === undefined) return refusal('NOT_FOUND', 'no such session', 'never');
  const closed = closedSessionRefusal(session, 'nothing was accepted', () =>
    deps.journal.sessionRecordCheck(sessionId),
  );
  if (closed !== undefined) return refusal(closed.code, closed.message, 'never');
  const { waitMs, rest, problem } = splitWait(tool, args, deps.config.agents.wait_ms_default ?? callWaitMsDefault);
  if (problem !== undefined) return problem;
  if (tool === 'ssh_exec' && deps.sshChannel === undefined)
    return refusal('UNSUPPORTED_ACTION', 'this broker has no SSH channel', 'never', 'host');
  if (typeof tool === 'object' && deps.upstreams === undefined)
    return refusal('UNSUPPORTED_ACTION', 'this broker has no upstream MCP servers', 'never', 'name');

  // Refused before admission: nothing is journaled for a call over a bound.
  const running = open.tryBegin(sessionId);
  if ('bound' in running)
    return refusal(
      'RATE_LIMITED',
      running.bound === 'open'
        ? `at most ${running.max} actions of one session may wait undispatched at once; cancel some or wait for them (action_status)`
        : `at most ${running.max} actions of one session may run at once (waiting, or dispatched until their outcome is recorded); wait for some to finish (action_status)`,
      'backoff',
    );
  const started = startExecutor(deps, sessionId, tool, rest, running);
  // The executor outlives a caller that stopped waiting: its action counts until it returns.
  started.run.then(
    () => open.end(sessionId, running),
    () => open.end(sessionId, running),
  );
  if (watch.onRecorded !== undefined) tellRecorded(deps, started, watch.onRecorded);
  const ended = await raceCaller(deps, started, waitMs, signal, watch.onProgress);
  if (ended.kind === 'done') return ended.answer;
  if (ended.kind === 'broker_stopping') return brokerStoppingAnswer(deps, started);
  return answerCallerEnd(deps, started, ended, waitMs);
}

/** Runs the executor for one call; its ids name the action as soon as it is minted (or, for retry_of, admitted). */
function startExecutor(
  deps: AgentBackendDeps,
  sessionId: string,
  tool: ActionTool,
  rest: unknown,
  running: { actionId?: string | undefined },
): Started {
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
      : tool === 'ssh_exec'
        ? executeSshAction({ ...common, channel: deps.sshChannel as SshChannel }, rest).then((r) =>
            executedAnswer(deps, r.envelope, r.output === undefined ? {} : { output: r.output }),
          )
        : executeMcpAction(
            { ...common, upstreams: deps.upstreams as McpUpstreams },
            { server: tool.server, tool: tool.tool, arguments: rest },
          ).then((r) => executedAnswer(deps, r.envelope, r.result === undefined ? {} : { mcpResult: r.result }));
  // Once admitted, a thrown error is answered from the record: never a bare refusal, which would
  // tell the agent "not_attempted, fix and resend" about an action that may have been sent.
  const run = executed.catch((error: unknown) => {
    // A retry_of the executor refused before it named the action, or one the stopping broker did not start (the queue
    // holds releases: SHUTTING_DOWN, thrown before any lease): a coded refusal, nothing recorded.
    if (isCodedError(error) && (actionId === undefined || error.code === 'SHUTTING_DOWN'))
      return retryRefusal(error, deps.vault.state());
    if (closedByShutdown(deps.journal))
      deps.logger?.info({ action_id: actionId }, 'the broker stopped while this action ran; the next start records it');
    else deps.logger?.error({ err: error, action_id: actionId }, 'action execution failed');
    return recordedAnswer(deps, actionId, error);
  });
  return { run, admitted, actionId: () => actionId };
}

/**
 * Tells `onRecorded` the action's id once its admission is on disk, so a caller that then loses the answer to a broker
 * restart can still name the action (action_status, fetch_result). Usually by a sync other appends asked for
 * (Journal.onceDurable starts none): the journal releases such watchers before the appends its sync covers, so for an
 * action dispatched at once this runs in the turn that writes the dispatch's first byte, ahead of the dispatcher. An
 * action that waits instead (for a person, for its lane) may see no other sync for as long as it waits: after
 * `recordedSyncAfterMs` it asks for one itself, so a restart during a card's wait still finds the caller told.
 */
function tellRecorded(deps: AgentBackendDeps, started: Started, onRecorded: (actionId: string) => void): void {
  started.admitted
    .then(async () => {
      const id = started.actionId();
      const state = id === undefined ? undefined : deps.journal.getAction(id);
      if (id === undefined || state === undefined) return;
      const covered = deps.journal.onceDurable(state.first_seq);
      // A sync of what is committed (the admission is), flushing nothing held: a failed one fails the journal, and
      // `covered` with it, so the timer's own promise has nothing more to say.
      const timer = setTimeout(() => deps.journal.synced().catch(() => undefined), recordedSyncAfterMs);
      timer.unref();
      await covered.finally(() => clearTimeout(timer));
      onRecorded(id);
    })
    // A failed journal tells nothing more (the answer says JOURNAL_UNAVAILABLE).
    .catch(() => undefined);
}

/** The executor's answer, the caller's deadline or the caller's stop, whichever comes first; progress meanwhile. */
async function raceCaller(
  deps: AgentBackendDeps,
  started: Started,
  waitMs: number,
  signal: AbortSignal,
  onProgress: ((p: CallProgress) => void) | undefined,
): Promise<Ended> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = (): void => undefined;
  const heartbeatMs = deps.config.agents.progress_heartbeat_ms ?? progressHeartbeatMsDefault;
  const stopProgress =
    onProgress === undefined ? undefined : watchProgress(waitSource(deps), started.actionId, onProgress, heartbeatMs);
  return Promise.race<Ended>([
    started.run.then((answer): Ended => ({ kind: 'done', answer })),
    new Promise<Ended>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'timeout' }), waitMs);
      timer.unref();
    }),
    new Promise<Ended>((resolve) => {
      onAbort = () =>
        resolve(
          signal.reason === brokerStopping
            ? { kind: 'broker_stopping' }
            : { kind: 'stopped', stop: signal.reason === 'disconnected' ? 'disconnected' : 'cancelled' },
        );
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }),
  ]).finally(() => {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    stopProgress?.();
  });
}

/**
 * The broker closed the caller's connection because it is stopping. Not the caller's doing, and no person's: nothing
 * is recorded (no CALLER_DISCONNECTED, no CANCELLED in the agent's name). The action stays as recorded and the next
 * start's recovery closes it as after a crash (BROKER_RESTARTED: not_attempted before dispatch, unknown after). The
 * connection is gone, so this answer is for the record of the call only.
 */
function brokerStoppingAnswer(deps: AgentBackendDeps, started: Started): ToolAnswer {
  const id = started.actionId();
  const state = id === undefined ? undefined : deps.journal.getAction(id);
  if (id === undefined || state === undefined)
    return refusal(
      'BROKER_RESTARTED',
      'the broker stopped before this call was admitted; nothing was recorded',
      'backoff',
    );
  return {
    ...actionAnswer({
      envelope: stateEnvelope(state),
      state,
      note: `(the broker is stopping; action ${id} stays as recorded and the next start closes it as its record proves)`,
    }),
    isError: true,
  };
}

/** The caller stopped waiting first: its event is recorded on the admitted action, which stands. */
async function answerCallerEnd(
  deps: AgentBackendDeps,
  started: Started,
  ended: Exclude<Ended, { kind: 'done' } | { kind: 'broker_stopping' }>,
  waitMs: number,
): Promise<ToolAnswer> {
  // Admission is one commit away at most; if the executor finished meanwhile, its answer stands.
  const first = await Promise.race([
    started.admitted.then(() => undefined),
    started.run.then(
      (answer) => answer,
      () => undefined,
    ),
  ]);
  if (first !== undefined) return first;
  const id = started.actionId();
  const state = id === undefined ? undefined : deps.journal.getAction(id);
  if (id === undefined || state === undefined) return started.run;
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
  const message = `the caller's wait (${waitMs} ms) passed after dispatch; the remote operation continues under its own deadline and its outcome is unknown until recorded: ${hint}`;
  const timedOut =
    stoppedAfterDispatch(after, 'timed_out', 'CALLER_DEADLINE_EXCEEDED', message) ?? stateEnvelope(after, 'timed_out');
  return {
    ...actionAnswer({
      envelope: timedOut,
      state: after,
      note: `(stopped waiting after ${waitMs} ms; dispatched, outcome unknown until recorded: ${hint})`,
    }),
    isError: true,
  };
}

/**
 * The executor's own answer. When it carries the response (or output) of a committed result it
 * names that result as its handoff, so the socket can report whether the answer reached the caller.
 */
function executedAnswer(
  deps: AgentBackendDeps,
  envelope: Envelope,
  carried: Pick<ActionAnswerParts, 'response' | 'output' | 'mcpResult'>,
): ToolAnswer {
  const state = deps.journal.getAction(envelope.invocation_id);
  const answer = actionAnswer({ envelope, state, ...carried });
  const carries = carried.response !== undefined || carried.output !== undefined || carried.mcpResult !== undefined;
  const handoff = carries ? handoffOf(state) : undefined;
  return handoff === undefined ? answer : { ...answer, handoff };
}

/** The caller's deadline passed or it stopped waiting: a caller event is recorded; the action stands. */
async function callerEnded(
  deps: AgentBackendDeps,
  id: string,
  state: ActionState,
  ended: Exclude<Ended, { kind: 'done' } | { kind: 'broker_stopping' }>,
  waitMs: number,
): Promise<ToolAnswer> {
  if (ended.kind === 'timeout') return callerTimedOut(deps, id, state, waitMs);
  const after = (await deps.queue.callerStopped(id, ended.stop)) ?? state;
  const disposition = ended.stop === 'disconnected' ? 'disconnected' : 'canceled';
  // A disconnected caller's record says CALLER_DISCONNECTED (and nobody reads the answer): the state as recorded.
  const stopped =
    ended.stop === 'cancelled'
      ? stoppedAfterDispatch(after, disposition, 'CALLER_CANCELLED', cancelledAfterDispatch(id))
      : undefined;
  if (stopped !== undefined)
    return {
      ...actionAnswer({
        envelope: stopped,
        state: after,
        note: cancelledNote,
      }),
      isError: true,
    };
  return actionAnswer({
    envelope: stateEnvelope(after, disposition),
    state: after,
    note:
      after.dispatch_seq === null
        ? '(cancelled before dispatch: nothing was sent)'
        : '(the caller stopped waiting after dispatch; the effect is as recorded)',
  });
}

/** The text block's line for it (a client may read only the text). */
export const cancelledNote =
  '(cancelled after dispatch: the remote operation was not stopped; its outcome is unknown until recorded — action_status with wait_ms, or fetch_result; never resend)';

/** What CALLER_CANCELLED says after dispatch: the operation was not stopped, and how to learn its outcome. */
export function cancelledAfterDispatch(id: string): string {
  return `the caller cancelled after dispatch; the remote operation was not stopped and its outcome is unknown until recorded: call action_status {"action_id":"${id}","wait_ms":…} to wait on, or fetch_result once it settled`;
}

/**
 * A refused retry_of: the request was wrong (after_correction), the broker is stopping or the vault is locked (backoff:
 * ask again once it runs, or once a person unlocks — an earlier run's sealed record, VAULT_LOCKED or
 * AUDIT_KEY_UNAVAILABLE while locked, is read then), or no retry is open to it (never) — as for the record of a run
 * that never had a key, which no unlock opens (passesOnceUnlocked).
 */
function retryRefusal(error: CodedError, vault: VaultState): ToolAnswer {
  const correctable: readonly string[] = [
    'INVALID_ARGUMENT',
    'INVALID_TARGET',
    'IDEMPOTENCY_MISMATCH',
    'FINGERPRINT_MISMATCH',
    'FORBIDDEN_HEADER',
    'PAYLOAD_LIMIT',
  ];
  const retry = correctable.includes(error.code)
    ? 'after_correction'
    : error.code === 'SHUTTING_DOWN' || passesOnceUnlocked(error, vault)
      ? 'backoff'
      : 'never';
  return refusal(error.code, error.message, retry, error.field);
}

/**
 * The answer for an admitted action whose executor (or caller-event append) threw: its envelope as
 * the journal records it — unknown once DISPATCH_STARTED is durable, committed with the stored
 * result if it was committed — with isError unless a success is recorded. Only an error before
 * admission (nothing journaled, or the journal unreadable) is rethrown, for call() to refuse.
 */
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
    // This answer is the call's own (it completes it), unless the record already says how the caller's wait ended.
    envelope: stateEnvelope(state, state.caller_disposition ?? 'completed'),
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
  tool: ActionTool,
  args: unknown,
  waitMsDefault: number,
): { waitMs: number; rest: unknown; problem?: ToolAnswer } {
  // An upstream tool's arguments are all the upstream's (it may have a timeout_ms of its own): the default wait.
  if (typeof tool === 'object') return { waitMs: waitMsDefault, rest: args };
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

/** The queue and the journal as the waits read them. */
export function waitSource(deps: AgentBackendDeps): Parameters<typeof watchProgress>[0] {
  return {
    getAction: (id) => deps.journal.getAction(id),
    position: (id) => deps.queue.position(id),
    onChange: (listener) => deps.queue.onChange(listener),
  };
}
