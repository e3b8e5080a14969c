import type { NewEvent } from '../../contract/index.js';
import { PendingAppends, type DispatchGate } from '../../ports/index.js';
import type { CallEnd } from './call-tap.js';
import type { McpCallRequest, McpCallResult, McpChannelReport } from './mcp-types.js';
import type { CallWire } from './pinned-fetch.js';
import { StartFailed, type UpstreamSession, type WireObserver } from './upstream-session.js';

/** What one call needs of the registry: a started session reserved for it, and its return. */
export interface CallDeps {
  readonly gate: DispatchGate;
  /** A live session with this call counted in its inflight; throws StartFailed. */
  acquire(): Promise<UpstreamSession>;
  release(session: UpstreamSession, replied: boolean): void;
}

/** One setup attempt per call: a failed start is retried by the next call, after the backoff (docs/mcp-channel.md). */
const setupAttemptsMax = 1;
/** Upstream error messages kept in the report (the executor scrubs and caps what it delivers). */
const errorMessageCharsMax = 4_096;

/**
 * One tools/call, the truth rules in order: setup (a started session; for HTTP the call's own verified connection)
 * before the boundary, recorded as SETUP_ATTEMPT_FAILED when it fails; `gate.beginDispatch` awaited; only then the
 * request written; observations appended in the order seen; the report says what was seen, never what it means.
 */
export async function runCall(deps: CallDeps, request: McpCallRequest): Promise<McpChannelReport> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), request.deadlineMs);
  try {
    return await new CallRun(deps, request, deadline.signal).run();
  } finally {
    clearTimeout(timer);
  }
}

class CallRun {
  private readonly stop: AbortSignal;
  private session: UpstreamSession | undefined;
  private wire: CallWire | undefined;
  private readonly observations: PendingAppends;
  private journalFailed: unknown;
  private handed = false;
  private complete = false;
  private requestSentRecorded = false;
  private responseStarted = false;
  private httpStatus: number | undefined;
  private bodyEnded: (() => void) | undefined;

  constructor(
    private readonly deps: CallDeps,
    private readonly request: McpCallRequest,
    private readonly deadline: AbortSignal,
  ) {
    this.stop = request.signal === undefined ? deadline : AbortSignal.any([deadline, request.signal]);
    this.observations = new PendingAppends(deps.gate);
  }

  async run(): Promise<McpChannelReport> {
    if (this.stop.aborted) return this.notDispatched({ stoppedBeforeDispatch: this.stoppedReason() });
    try {
      this.session = await untilStopped(this.deps.acquire(), this.stop, (s) => this.deps.release(s, false));
      this.wire = await this.session.openCallWire(this.stop, this.observer());
    } catch (error) {
      this.releaseUnused();
      if (this.stop.aborted) return this.notDispatched({ stoppedBeforeDispatch: this.stoppedReason() });
      if (error instanceof StartFailed) return this.setupFailed(error);
      throw error;
    }
    if (this.stop.aborted) {
      this.releaseUnused();
      return this.notDispatched({ stoppedBeforeDispatch: this.stoppedReason() });
    }
    const session = this.session;
    this.request.onSessionSecrets?.(session.secrets);
    // Stopped since it was acquired (vault locked, broker stopping, the child gone): nothing may cross on it.
    if (session.stopping) {
      this.releaseUnused();
      if (session.stopReason === 'vault_locked') return this.notDispatched({ stoppedBeforeDispatch: 'signal' });
      return this.setupFailed(new StartFailed('mcp_spawn', 'spawn', 'stopped before dispatch', 'spawn_failed'));
    }
    const connection = session.calls === 0 ? 'fresh' : 'reused';
    session.calls += 1;
    try {
      // THE BOUNDARY: the tools/call is written only after DISPATCH_STARTED is durable.
      await this.deps.gate.beginDispatch(this.request.actionId, this.request.attempt, {
        connection,
        connection_id: session.connectionId,
      });
    } catch (journalFailed) {
      this.releaseUnused();
      return this.notDispatched({ journalFailed, connection });
    }
    return this.exchange(session, connection);
  }

  private async exchange(session: UpstreamSession, connection: 'fresh' | 'reused'): Promise<McpChannelReport> {
    const id = session.newCallId();
    this.bodyEnded = () => afterTicks(() => session.lose(id));
    const ended = session.call(
      id,
      { name: this.request.tool, arguments: this.request.arguments },
      this.observer(),
      this.wire,
    );
    const end = await Promise.race([ended, aborted(this.deadline, 'deadline'), aborted(this.request.signal, 'caller')]);
    if (end === 'deadline' || end === 'caller') {
      session.forget(id);
      // The MCP courtesy at a timeout; the effect stays unknown either way. A caller that left cuts nothing.
      if (end === 'deadline') session.cancelCall(id);
      this.wire?.socket?.socket.destroy();
    } else if (end.kind === 'reply') this.replied(end);
    else this.lost();
    // The observations held since the write ride in the settlement's commit, or share one commit now (or rode in an
    // earlier one).
    const ride = this.request.observationsRideWithSettlement === true && end !== 'caller';
    if (!ride) this.journalFailed ??= await this.observations.settled();
    this.deps.release(session, end !== 'deadline' && end !== 'caller' && end.kind === 'reply');
    return {
      ...(ride ? { observations: this.observations } : {}),
      dispatchStarted: true,
      handedToTransport: this.handed,
      requestComplete: this.complete,
      transportBroken: end !== 'deadline' && end !== 'caller' && end.kind === 'lost',
      connection,
      connectionId: session.connectionId,
      ...(end === 'deadline' ? { operationDeadline: true } : end === 'caller' ? { caller: 'cancelled' as const } : {}),
      ...(end !== 'deadline' && end !== 'caller' && end.kind === 'reply' ? replyFacts(end) : {}),
      ...(this.httpStatus === undefined ? {} : { httpStatus: this.httpStatus }),
      ...(this.journalFailed === undefined ? {} : { journalFailed: this.journalFailed }),
    };
  }

  private observer(): WireObserver {
    return {
      headersSent: () => {
        this.handed = true;
      },
      bodySent: () => this.requestSent(true),
      written: (complete) => this.requestSent(complete),
      responseStarted: (status) => {
        this.httpStatus = status;
        this.remoteStarted(status);
      },
      bodyEnded: () => this.bodyEnded?.(),
    };
  }

  private requestSent(complete: boolean): void {
    this.handed = true;
    if (this.requestSentRecorded) return;
    this.requestSentRecorded = true;
    this.complete = complete;
    this.record('REQUEST_SENT', { request_complete: complete });
  }

  private remoteStarted(status?: number): void {
    if (this.responseStarted) return;
    // A reply (or a status line) proves the whole request arrived, whatever order the callbacks ran in.
    this.requestSent(true);
    this.responseStarted = true;
    this.record('REMOTE_RESPONSE_STARTED', status === undefined ? {} : { status });
  }

  private replied(end: Extract<CallEnd, { kind: 'reply' }>): void {
    this.remoteStarted();
    this.record('REMOTE_RESPONSE_COMPLETE', { digest: end.digest });
  }

  private lost(): void {
    if (this.handed && !this.requestSentRecorded) this.requestSent(false);
    this.record('CONNECTION_LOST', {});
  }

  /** Observations are appended in the order seen, held for one commit, without holding up the wire. */
  private record(
    kind: 'REQUEST_SENT' | 'REMOTE_RESPONSE_STARTED' | 'REMOTE_RESPONSE_COMPLETE' | 'CONNECTION_LOST',
    payload: object,
  ): void {
    const event = {
      kind,
      action_id: this.request.actionId,
      payload: { attempt: this.request.attempt, ...payload },
    } as NewEvent;
    this.observations.add(event);
  }

  private async setupFailed(error: StartFailed): Promise<McpChannelReport> {
    const detail = error.detail.slice(0, 500);
    try {
      await this.deps.gate.append({
        kind: 'SETUP_ATTEMPT_FAILED',
        action_id: this.request.actionId,
        payload: { attempt: this.request.attempt, stage: error.stage, detail },
      });
    } catch (journalFailed) {
      return this.notDispatched({ journalFailed });
    }
    return this.notDispatched({
      setup: {
        failure: error.failure,
        stage: error.stage,
        attempts: 1,
        attemptsMax: setupAttemptsMax,
        detail,
        ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
      },
    });
  }

  private releaseUnused(): void {
    this.wire?.socket?.socket.destroy();
    if (this.session !== undefined) this.deps.release(this.session, false);
  }

  private stoppedReason(): 'deadline' | 'cancelled' {
    return this.request.signal?.aborted === true ? 'cancelled' : 'deadline';
  }

  private notDispatched(extra: Partial<McpChannelReport>): McpChannelReport {
    return {
      dispatchStarted: false,
      handedToTransport: false,
      requestComplete: false,
      transportBroken: false,
      connection: this.session === undefined || this.session.calls === 0 ? 'fresh' : 'reused',
      ...extra,
    };
  }
}

function replyFacts(
  end: Extract<CallEnd, { kind: 'reply' }>,
): Pick<McpChannelReport, 'reply' | 'result' | 'replyDigest'> {
  const { message, digest } = end;
  const error = message['error'] as { code?: unknown; message?: unknown } | undefined;
  if (error !== undefined) {
    const code = typeof error.code === 'number' && Number.isInteger(error.code) ? error.code : 0;
    const text = typeof error.message === 'string' ? error.message.slice(0, errorMessageCharsMax) : '';
    return { reply: { kind: 'protocol_error', code }, result: { error: { code, message: text } }, replyDigest: digest };
  }
  const result = (message['result'] ?? {}) as Record<string, unknown>;
  const isError = result['isError'] === true;
  const answer: McpCallResult = {
    content: Array.isArray(result['content']) ? (result['content'] as unknown[]) : [],
    ...(result['structuredContent'] === undefined ? {} : { structuredContent: result['structuredContent'] }),
    isError,
  };
  return { reply: { kind: isError ? 'tool_error' : 'result' }, result: answer, replyDigest: digest };
}

/** Resolves with `work`, or rejects when `stop` fires first; a session that arrives late is handed back. */
function untilStopped<T>(work: Promise<T>, stop: AbortSignal, late: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onStop = (): void => {
      work.then(late, () => undefined);
      reject(new Error('stopped before dispatch'));
    };
    if (stop.aborted) return onStop();
    stop.addEventListener('abort', onStop, { once: true });
    work.then(
      (value) => {
        stop.removeEventListener('abort', onStop);
        // Stopped first: onStop has already handed it back.
        if (!stop.aborted) resolve(value);
      },
      (error: unknown) => {
        stop.removeEventListener('abort', onStop);
        reject(error instanceof Error ? error : new Error('start failed'));
      },
    );
  });
}

function aborted<T extends string>(signal: AbortSignal | undefined, value: T): Promise<T> {
  if (signal === undefined) return new Promise<T>(() => undefined);
  if (signal.aborted) return Promise.resolve(value);
  return new Promise<T>((resolve) => signal.addEventListener('abort', () => resolve(value), { once: true }));
}

/**
 * The SDK parses a reply body through a chain of promise-based streams after the bytes arrived; a few turns of the
 * event loop let it deliver the reply before the call is declared lost at the body's end.
 */
function afterTicks(run: () => void, ticks = 3): void {
  if (ticks === 0) run();
  else setImmediate(() => afterTicks(run, ticks - 1));
}
