import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import type { NewEvent } from '../../contract/index.js';
import { checkWireRequest, classifyOutcome, type SetupFailure } from '../../core/index.js';
import { PendingAppends, type DispatchGate, type HeldObservations } from '../../ports/index.js';
import { HttpConnection } from './http-connection.js';
import { HttpConnectionPool } from './http-connection-pool.js';
import { defaultHttpLimits, type HttpLimits } from './http-limits.js';
import {
  openPinnedSocket,
  SetupFailed,
  type ConnectionTarget,
  type LookupAll,
  type SetupStage,
} from './open-pinned-socket.js';
import { providerRequestIdOf } from './provider-request-id.js';
import { joinedHeaderLines, keptResponseHeaderLines } from './response-headers.js';
import { forgetSocket, observeSocket } from './undici-observer.js';

/** One request as it will go on the wire, credential already injected. Never logged or journaled. */
export interface HttpWireRequest {
  readonly actionId: string;
  readonly target: ConnectionTarget & { readonly origin: string; readonly poolKey: string };
  readonly method: string;
  /** Path and query as sent (kind query: it carries the secret). */
  readonly path: string;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Uint8Array | undefined;
  /**
   * The operation deadline (the route's timeout_ms): when it passes, before dispatch nothing is sent, after it the
   * effect is unknown (OPERATION_TIMEOUT). Never the caller's wait: a caller that stops waiting does not cut it.
   */
  readonly timeoutMs: number;
  /** Aborts the action only while it is before dispatch (e.g. the vault locked). */
  readonly beforeDispatch: AbortSignal;
  /** The number of this call's first attempt (a retry continues the action's count); default 1. */
  readonly firstAttempt?: number;
  /** The retry lease generation the attempts run under (named on DISPATCH_STARTED, fenced by the journal). */
  readonly generation?: number;
  /**
   * Bytes to keep past the result cap for the scrubber (its lookaheadBytes for this credential's parts), at most
   * scrubLookaheadBytesMax; default the channel's scrubLookaheadBytes.
   */
  readonly scrubLookaheadBytes?: number;
  /** Response header holding the provider's request id, recorded on REMOTE_RESPONSE_STARTED. */
  readonly providerRequestIdHeader?: string;
  /**
   * The caller appends the settlement at once, with AppendOptions.withHeld (settle.ts): the channel does not commit its
   * observations on its own; they ride in the settlement's commit, and the report hands them over as `observations`.
   */
  readonly observationsRideWithSettlement?: boolean;
}

/** One attempt as the envelope and the executor see it. */
export interface AttemptReport {
  readonly n: number;
  readonly stage: string;
  readonly dispatched: boolean;
  readonly failure?: SetupFailure;
  readonly detail?: string;
  readonly connection?: 'fresh' | 'reused';
  readonly connection_id?: string;
}

export interface HttpResponseReport {
  readonly status: number;
  /** Allow-listed, non-secret response headers only; a repeated one's lines joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The same headers as the lines the remote sent (a repeated header has several): the executor scrubs them line by
   * line and together before it joins them. Absent: each header was one line (`headers`).
   */
  readonly headerLines?: Readonly<Record<string, readonly string[]>>;
  readonly framingComplete: boolean;
  /**
   * Bytes kept as received, unscrubbed: at most resultBodyBytesMax (diagnosticBytesMax for an incomplete response) plus
   * scrubLookaheadBytes. Never delivered as is: the executor scrubs, then cuts at the cap.
   */
  readonly body: Buffer;
  readonly truncated: boolean;
  readonly totalBytes: number;
  /** sha256 of every body byte received (not only the kept ones): for the journal's audit only, never an agent answer. */
  readonly digest: string;
}

/** What the channel observed. It decides nothing about the outcome: broker/core does. */
export interface HttpChannelReport {
  readonly attempts: readonly AttemptReport[];
  /** Setup failed on every fresh attempt (provably nothing sent). */
  readonly setup?: { failure: SetupFailure; stage: SetupStage; attempts: number; attemptsMax: number };
  /**
   * Stopped before dispatch by the beforeDispatch signal, the caller's deadline, or a request the
   * HTTP client would refuse (`request_refused`: see requestRefused; nothing was set up or sent).
   */
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'request_refused';
  /** Which part of the wire request would be refused and why; never its value (it may hold the secret). */
  readonly requestRefused?: { readonly field: string; readonly why: string };
  readonly dispatchStarted: boolean;
  readonly dispatchSeq?: number;
  readonly connection?: 'fresh' | 'reused';
  readonly connectionId?: string;
  readonly handedToTransport: boolean;
  readonly requestComplete: boolean;
  readonly transportBroken: boolean;
  /** The operation deadline (request.timeoutMs) fired after dispatch. */
  readonly operationDeadline: boolean;
  /** The vault locked while DISPATCH_STARTED was being made durable: the request was never handed to the connection. */
  readonly vaultLocked?: boolean;
  /** An informational (1xx) response arrived: remote receipt, never a result. */
  readonly informationalSeen?: boolean;
  readonly response?: HttpResponseReport;
  readonly peerFingerprint?: string;
  /** A journal append failed: the record is not trustworthy beyond what was durable. */
  readonly journalFailed?: unknown;
  /** With observationsRideWithSettlement, after dispatch: the observation appends, held for the settlement's commit. */
  readonly observations?: HeldObservations;
}

export interface HttpChannelOptions {
  readonly gate: DispatchGate;
  readonly limits?: Partial<HttpLimits>;
  /** DNS resolution (all addresses); tests inject answers to exercise the network guard. */
  readonly lookup?: LookupAll;
}

/**
 * The HTTP channel (undici 7). The dispatch boundary, on both paths, is a single line: `dispatch()`
 * is only ever called after `await gate.beginDispatch(...)` resolved for this attempt —
 *  - fresh: DNS (pinned), TCP and TLS are done here first (openPinnedSocket), each stage recorded;
 *    a failure is SETUP_ATTEMPT_FAILED and, while no attempt crossed dispatch and the failure is
 *    transient, a bounded retry;
 *  - reused: the idle connection is taken exclusively from the pool, then beginDispatch, then the
 *    request is handed to it.
 * The connection's undici Client can obtain no socket but the one handed to it (http-connection.ts).
 */
export class HttpChannel {
  readonly limits: HttpLimits;
  private readonly pool: HttpConnectionPool;
  /** Connections carrying a dispatched request now (between the boundary and the exchange's end). */
  private readonly exchanging = new Set<HttpConnection>();

  constructor(private readonly options: HttpChannelOptions) {
    this.limits = { ...defaultHttpLimits, ...options.limits };
    this.pool = new HttpConnectionPool(this.limits.idleConnectionsMax);
  }

  async perform(request: HttpWireRequest): Promise<HttpChannelReport> {
    const deadline = new AbortController();
    // Aborted by the deadline or by the caller's signal, whichever is first (AbortSignal.any, ~10 µs a call on Node 20
    // with a weak-reference registration per source, is one of the larger costs of an action at high concurrency).
    const stop = new AbortController();
    const stopWith = (reason: unknown): void => stop.abort(reason);
    const onCaller = (): void => stopWith(request.beforeDispatch.reason);
    if (request.beforeDispatch.aborted) onCaller();
    else request.beforeDispatch.addEventListener('abort', onCaller, { once: true });
    const timer = setTimeout(() => {
      deadline.abort();
      stopWith(deadline.signal.reason);
    }, request.timeoutMs);
    const beforeDispatch = stop.signal;
    const journal = new PendingAppends(this.options.gate);
    try {
      const report = await this.attempts(request, beforeDispatch, deadline.signal, journal);
      if (request.observationsRideWithSettlement === true && report.dispatchStarted)
        return { ...report, observations: journal };
      const journalFailed = await journal.settled();
      return journalFailed === undefined ? report : { ...report, journalFailed };
    } finally {
      clearTimeout(timer);
      request.beforeDispatch.removeEventListener('abort', onCaller);
    }
  }

  /** Closes idle connections (shutdown, tests). */
  close(): void {
    this.pool.closeAll();
  }

  /**
   * The broker stopped with requests still in flight (its journal is closed, so nothing more is recorded): their
   * connections are destroyed, so no process waits on a remote whose answer could no longer be recorded. The next
   * start's recovery closes those actions (unknown after dispatch).
   */
  cutInFlight(): void {
    for (const connection of this.exchanging) connection.close();
    this.exchanging.clear();
  }

  idleConnections(poolKey: string): number {
    return this.pool.idleCount(poolKey);
  }

  // eslint-disable-next-line max-lines-per-function -- the attempt loop (pool reuse, stale retry, dispatch boundary) reads as one
  private async attempts(
    request: HttpWireRequest,
    beforeDispatch: AbortSignal,
    deadline: AbortSignal,
    journal: PendingAppends,
  ): Promise<HttpChannelReport> {
    const attempts: AttemptReport[] = [];
    const notDispatched = {
      dispatchStarted: false,
      handedToTransport: false,
      requestComplete: false,
      transportBroken: false,
      operationDeadline: false,
    };
    const stopped = (): HttpChannelReport => ({
      attempts,
      ...notDispatched,
      stoppedBeforeDispatch: deadline.aborted ? 'deadline' : 'signal',
    });
    const first = request.firstAttempt ?? 1;
    // undici validates inside dispatch(), after the boundary, where its refusal reads as a send that
    // may have happened (unknown, lane blocked). Its rules run here instead, before any connection
    // is set up on either path: the request is the same for every attempt, so once is enough.
    const wire = checkWireRequest(request.method, request.path, request.headers);
    if (!wire.ok) {
      attempts.push({ n: first, stage: 'request_build', dispatched: false, detail: `${wire.field}: ${wire.why}` });
      return {
        attempts,
        ...notDispatched,
        stoppedBeforeDispatch: 'request_refused',
        requestRefused: { field: wire.field, why: wire.why },
      };
    }
    for (let n = first; ; n += 1) {
      let connection = this.pool.take(request.target.poolKey);
      const reused = connection !== undefined;
      if (connection === undefined) {
        try {
          const opened = await openPinnedSocket(request.target, {
            signal: beforeDispatch,
            connectTimeoutMs: this.limits.connectTimeoutMs,
            dnsAddressesMax: this.limits.dnsAddressesMax,
            ...(this.options.lookup === undefined ? {} : { lookup: this.options.lookup }),
          });
          connection = new HttpConnection(opened, request.target.origin, this.limits);
        } catch (error) {
          if (!(error instanceof SetupFailed)) throw error;
          if (error.failure === 'cancelled') return stopped();
          const failure = error.failure;
          attempts.push({ n, stage: error.stage, dispatched: false, failure, detail: error.detail });
          await this.options.gate.append({
            kind: 'SETUP_ATTEMPT_FAILED',
            action_id: request.actionId,
            payload: { attempt: n, stage: error.stage, detail: error.detail },
          });
          const setup = {
            failure,
            stage: error.stage,
            attempts: n - first + 1,
            attemptsMax: this.limits.setupAttemptsMax,
          };
          // The retry decision is the core's: transient and attempts left → backoff.
          const verdict = classifyOutcome({
            channel: 'http',
            setup,
            dispatchStarted: false,
            handedToTransport: false,
            requestComplete: false,
            idempotent: false,
          });
          if (verdict.retry !== 'backoff') return { attempts, ...notDispatched, setup };
          const backoffMs = Math.min(this.limits.setupBackoffMsBase * 2 ** (n - first), this.limits.setupBackoffMsMax);
          try {
            await sleep(backoffMs, undefined, { signal: beforeDispatch });
          } catch {
            return stopped();
          }
          continue;
        }
      }
      if (beforeDispatch.aborted) {
        if (reused) this.pool.release(request.target.poolKey, connection);
        else connection.close();
        return stopped();
      }
      const kind = reused ? 'reused' : 'fresh';
      let dispatchSeq: number;
      try {
        // THE BOUNDARY: nothing below runs until DISPATCH_STARTED is durable.
        const peer = connection.opened.peerFingerprint;
        const { event } = await this.options.gate.beginDispatch(request.actionId, n, {
          connection: kind,
          connection_id: connection.id,
          // The verified TLS peer is part of the durable boundary record (a pin, else the CA chain).
          ...(peer === undefined
            ? {}
            : { peer_identity: peer, peer_trust: request.target.pins === undefined ? 'ca_verified' : 'pinned' }),
          ...(request.generation === undefined ? {} : { generation: request.generation }),
        });
        dispatchSeq = event.seq;
      } catch (journalFailed) {
        // Not durable → not sent. The connection never saw this request.
        if (reused) this.pool.release(request.target.poolKey, connection);
        else connection.close();
        return { attempts, ...notDispatched, journalFailed };
      }
      attempts.push({ n, stage: 'dispatch_started', dispatched: true, connection: kind, connection_id: connection.id });
      const identity: Pick<
        HttpChannelReport,
        'attempts' | 'dispatchStarted' | 'dispatchSeq' | 'connection' | 'connectionId' | 'peerFingerprint'
      > = {
        attempts,
        dispatchStarted: true,
        dispatchSeq,
        connection: kind,
        connectionId: connection.id,
        ...(connection.opened.peerFingerprint === undefined
          ? {}
          : { peerFingerprint: connection.opened.peerFingerprint }),
      };
      if (request.beforeDispatch.aborted) {
        // The vault locked while DISPATCH_STARTED was being made durable: a locked vault starts no credential-backed
        // action, so the request is never handed over. The row is durable, so the outcome stays unknown; the report
        // says truthfully that nothing reached the transport. The connection never saw the request.
        if (reused) this.pool.release(request.target.poolKey, connection);
        else connection.close();
        return { ...identity, ...notDispatched, dispatchStarted: true, vaultLocked: true };
      }
      this.exchanging.add(connection);
      let exchange: Awaited<ReturnType<HttpChannel['exchange']>>;
      try {
        exchange = await this.exchange(request, connection, n, deadline, journal);
      } finally {
        this.exchanging.delete(connection);
      }
      const reusable = exchange.response?.framingComplete === true && !exchange.transportBroken && connection.alive();
      if (reusable) this.pool.release(request.target.poolKey, connection);
      else connection.close();
      return { ...identity, ...exchange };
    }
  }

  /** Hands the request to undici on `connection` and observes until the response ends or breaks. */
  // eslint-disable-next-line max-lines-per-function -- undici's dispatch handler callbacks close over one exchange's observation state
  private exchange(
    request: HttpWireRequest,
    connection: HttpConnection,
    attempt: number,
    deadline: AbortSignal,
    journal: PendingAppends,
  ): Promise<
    Pick<
      HttpChannelReport,
      | 'handedToTransport'
      | 'requestComplete'
      | 'transportBroken'
      | 'operationDeadline'
      | 'informationalSeen'
      | 'response'
    >
  > {
    const limits = this.limits;
    const lookaheadBytes = Math.min(
      request.scrubLookaheadBytes ?? limits.scrubLookaheadBytes,
      limits.scrubLookaheadBytesMax,
    );
    const actionId = request.actionId;
    const facts = {
      handedToTransport: false,
      requestComplete: false,
      transportBroken: false,
      operationDeadline: false,
      informationalSeen: false,
    };
    let status: number | undefined;
    let headerLines: Record<string, readonly string[]> = {};
    let headers: Record<string, string> = {};
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let totalBytes = 0;
    let overLimit = false;
    const hash = createHash('sha256');
    connection.requests += 1;
    observeSocket(connection.socket, {
      headersSent: () => {
        facts.handedToTransport = true;
      },
      bodySent: () => {
        facts.requestComplete = true;
        journal.add({ kind: 'REQUEST_SENT', action_id: actionId, payload: { attempt, request_complete: true } });
      },
    });
    return new Promise((resolve) => {
      let controller: Dispatcher.DispatchController | undefined;
      const onDeadline = (): void => {
        facts.operationDeadline = true;
        controller?.abort(new DeadlineError());
      };
      deadline.addEventListener('abort', onDeadline, { once: true });
      const finish = (framingComplete: boolean): void => {
        deadline.removeEventListener('abort', onDeadline);
        forgetSocket(connection.socket);
        if (facts.handedToTransport && !facts.requestComplete) {
          journal.add({ kind: 'REQUEST_SENT', action_id: actionId, payload: { attempt, request_complete: false } });
        }
        const digest = `sha256:${hash.digest('hex')}`;
        if (framingComplete)
          journal.add({ kind: 'REMOTE_RESPONSE_COMPLETE', action_id: actionId, payload: { attempt, digest } });
        else if (facts.transportBroken)
          journal.add({ kind: 'CONNECTION_LOST', action_id: actionId, payload: { attempt } });
        // Bytes past the result cap are kept as the scrubber's lookahead: the executor scrubs, then cuts,
        // so a secret that starts before the cut is redacted whole instead of shown minus its tail.
        const keepMax = (framingComplete ? limits.resultBodyBytesMax : limits.diagnosticBytesMax) + lookaheadBytes;
        const body = Buffer.concat(kept).subarray(0, keepMax);
        resolve({
          ...facts,
          ...(status === undefined
            ? {}
            : {
                response: {
                  status,
                  headers,
                  headerLines,
                  framingComplete,
                  body,
                  truncated: body.length < totalBytes,
                  totalBytes,
                  digest,
                },
              }),
        });
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (deadline.aborted) onDeadline();
        },
        onResponseStart(_c, statusCode, responseHeaders: IncomingHttpHeaders) {
          journal.add(responseStarted(request, attempt, statusCode, responseHeaders));
          if (statusCode < 200) {
            // 1xx (undici passes e.g. 103 through; it refuses an unexpected 100) proves receipt, never settles.
            facts.informationalSeen = true;
            return;
          }
          // How long the pool may keep this connection idle afterwards (the server's idle timeout hint).
          connection.keepAliveHint(responseHeaders['keep-alive']);
          status = statusCode;
          headerLines = keptResponseHeaderLines(responseHeaders);
          headers = joinedHeaderLines(headerLines);
        },
        onResponseData(c, chunk: Buffer) {
          totalBytes += chunk.length;
          hash.update(chunk);
          if (totalBytes > limits.responseBytesMax) {
            overLimit = true;
            c.abort(new ResponseTooLargeError());
            return;
          }
          if (keptBytes < limits.resultBodyBytesMax + lookaheadBytes) {
            kept.push(chunk);
            keptBytes += chunk.length;
          }
        },
        onResponseEnd() {
          finish(true);
        },
        onResponseError(_c, _error) {
          // The error object is never kept: undici errors can describe the request. Only facts.
          if (!facts.operationDeadline && !overLimit) facts.transportBroken = true;
          finish(false);
        },
      };
      connection.client.dispatch(dispatchOptions(request, limits), handler);
    });
  }
}

function responseStarted(
  request: HttpWireRequest,
  attempt: number,
  status: number,
  responseHeaders: IncomingHttpHeaders,
): NewEvent {
  // The provider's request id is a correlation for a later reconciliation (bounded, never an echo of the request).
  const providerRequestId = providerRequestIdOf(request.providerRequestIdHeader, responseHeaders, request);
  return {
    kind: 'REMOTE_RESPONSE_STARTED',
    action_id: request.actionId,
    payload: {
      attempt,
      status,
      ...(providerRequestId === undefined ? {} : { provider_request_id: providerRequestId }),
    },
  };
}

/** undici's options for one exchange: the request as the executor built it, and nothing for undici to decide. */
function dispatchOptions(request: HttpWireRequest, limits: HttpLimits): Dispatcher.DispatchOptions {
  const body =
    request.body === undefined
      ? null
      : Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength);
  return {
    path: request.path,
    method: request.method as Dispatcher.HttpMethod,
    headers: request.headers.flatMap(([name, value]) => [name, value]),
    body,
    // undici must not decide anything about retrying or resetting on its own.
    idempotent: false,
    reset: false,
    // The operation deadline decides how long a slow remote may take: undici's own waits never end it first.
    headersTimeout: Math.max(limits.headersTimeoutMs, request.timeoutMs + 1_000),
    bodyTimeout: Math.max(limits.bodyTimeoutMs, request.timeoutMs + 1_000),
  };
}

class DeadlineError extends Error {
  constructor() {
    super('the caller deadline passed');
    this.name = 'DeadlineError';
  }
}

class ResponseTooLargeError extends Error {
  constructor() {
    super('the response exceeded the read limit');
    this.name = 'ResponseTooLargeError';
  }
}
