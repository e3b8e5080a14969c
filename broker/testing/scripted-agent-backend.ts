import type {
  AgentPeer,
  AgentRouteList,
  AgentToolName,
  AgentToolReply,
  Envelope,
  EnvelopeError,
} from '../contract/index.js';
import type { AgentBackend, CallProgress, TargetNames, ToolAnswer } from '../ports/index.js';

/** One call as the scripted backend received it. */
export interface ScriptedCall {
  readonly sessionId: string;
  readonly tool: AgentToolName;
  readonly args: unknown;
  readonly signal: AbortSignal;
  /** Resolves with the signal's reason when the socket aborts this call. */
  readonly aborted: Promise<unknown>;
  /** The socket's progress callback: present when the client's request carried a progressToken. */
  readonly onProgress: ((p: CallProgress) => void) | undefined;
  /** The socket's action_recorded callback: present when the client declared the capability (postern mcp does). */
  readonly onRecorded: ((actionId: string) => void) | undefined;
}

export type ScriptedResponder = (call: ScriptedCall) => ToolAnswer | Promise<ToolAnswer>;

/**
 * A stand-in for the broker's queue behind the agent socket (the real one lives in broker/queue),
 * for transport tests only: it records every session, call and disconnect, answers with valid
 * envelopes by default, and lets a test script any answer — including one that never comes, one
 * that throws, or a refused session. Waiting is by promise (`nextCall`, `nextDisconnect`), never by
 * sleeping.
 */
export class ScriptedAgentBackend implements AgentBackend {
  readonly sessionsOpened: { peer: AgentPeer; client: { name?: string; version?: string }; session_id: string }[] = [];
  readonly calls: ScriptedCall[] = [];
  readonly disconnected: string[] = [];
  /** Set to make openSession reject (e.g. a CodedError SESSION_REVOKED). */
  openSessionError: Error | undefined;
  /** How calls are answered; replace it per test. */
  respond: ScriptedResponder = defaultAnswer;
  /** The names an unknown route or host's refusal names (targetNames); scriptedRouteList's by default. */
  names: TargetNames | undefined = {
    routes: scriptedRouteList.routes.map((r) => r.name),
    ssh_hosts: scriptedRouteList.ssh_hosts.map((h) => h.name),
  };

  private sessionCounter = 0;
  private readonly sessionsByProcess = new Map<string, string>();
  private readonly callWaiters: ((call: ScriptedCall) => void)[] = [];
  private readonly disconnectWaiters: ((sessionId: string) => void)[] = [];
  private callsTaken = 0;
  private disconnectsTaken = 0;

  async openSession(peer: AgentPeer, client: { name?: string; version?: string }): Promise<{ session_id: string }> {
    if (this.openSessionError !== undefined) throw this.openSessionError;
    // Same process (pid + start time) → same session, like the real backend.
    const processKey = `${peer.pid}:${peer.start_time}`;
    let sessionId = this.sessionsByProcess.get(processKey);
    if (sessionId === undefined) {
      this.sessionCounter += 1;
      sessionId = `ses_${this.sessionCounter}`;
      this.sessionsByProcess.set(processKey, sessionId);
    }
    this.sessionsOpened.push({ peer, client, session_id: sessionId });
    return { session_id: sessionId };
  }

  targetNames(): TargetNames | undefined {
    return this.names;
  }

  sessionDisconnected(sessionId: string): void {
    this.disconnected.push(sessionId);
    this.disconnectWaiters.shift()?.(sessionId);
  }

  async call(
    sessionId: string,
    tool: AgentToolName,
    args: unknown,
    signal: AbortSignal,
    onProgress?: (p: CallProgress) => void,
    onRecorded?: (actionId: string) => void,
  ): Promise<ToolAnswer> {
    const aborted = new Promise<unknown>((resolve) => {
      if (signal.aborted) resolve(signal.reason);
      else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
    });
    const call: ScriptedCall = { sessionId, tool, args, signal, aborted, onProgress, onRecorded };
    this.calls.push(call);
    const waiter = this.callWaiters.shift();
    if (waiter !== undefined) {
      this.callsTaken += 1;
      waiter(call);
    }
    return this.respond(call);
  }

  /** The next call not yet handed to a test (in arrival order). */
  nextCall(): Promise<ScriptedCall> {
    const waiting = this.calls[this.callsTaken];
    if (waiting !== undefined) {
      this.callsTaken += 1;
      return Promise.resolve(waiting);
    }
    return new Promise((resolve) => this.callWaiters.push(resolve));
  }

  /** The next sessionDisconnected not yet handed to a test. */
  nextDisconnect(): Promise<string> {
    const waiting = this.disconnected[this.disconnectsTaken];
    if (waiting !== undefined) {
      this.disconnectsTaken += 1;
      return Promise.resolve(waiting);
    }
    return new Promise((resolve) =>
      this.disconnectWaiters.push((id) => {
        this.disconnectsTaken += 1;
        resolve(id);
      }),
    );
  }
}

/** A responder that waits until the call is aborted, then answers as the real queue would. */
export const holdUntilAborted: ScriptedResponder = async (call) => {
  const reason = await call.aborted;
  return envelopeAnswer(
    scriptedEnvelope(`act_held`, {
      code: 'CALLER_CANCELLED',
      phase: 'validation',
      outcome: 'not_attempted',
      retry: 'never',
      message: `stopped: ${String(reason)}`,
    }),
  );
};

export const scriptedRouteList: AgentRouteList = {
  routes: [
    {
      name: 'github',
      methods: ['GET', 'POST'],
      approval: 'none',
      idempotency_contract: true,
      base_path: '/',
      rules: [],
    },
  ],
  ssh_hosts: [{ name: 'build-box', approval: 'per_call', commands: [] }],
};

/** A valid envelope: committed success unless an error is given. */
export function scriptedEnvelope(invocationId: string, error?: EnvelopeError): Envelope {
  return {
    invocation_id: invocationId,
    caller_disposition: 'completed',
    effect: error === undefined ? 'succeeded' : error.outcome === 'not_attempted' ? 'no_effect' : 'unknown_effect',
    outcome_basis: error === undefined ? 'complete_remote_result' : 'scripted',
    ...(error === undefined ? {} : { error }),
    evidence: {
      dispatch_started: error === undefined || error.outcome !== 'not_attempted',
      dispatch_evidence: error === undefined ? 'remote_receipt' : 'never_started',
      request_complete: error === undefined,
      response_headers_received: error === undefined,
      response_complete: error === undefined,
      attempts: [],
      journal_seq: 1,
      request_fingerprint: 'sha256:0000000000000000000000000000000000000000000000000000000000000000',
    },
  };
}

export function envelopeAnswer(structured: AgentToolReply): ToolAnswer {
  const isError = 'error' in structured && structured.error !== undefined;
  return { isError, structured, text: isError ? `${structured.error?.code}` : 'ok' };
}

let invocationCounter = 0;

function defaultAnswer(call: ScriptedCall): ToolAnswer {
  if (call.tool === 'list_routes') return { isError: false, structured: scriptedRouteList, text: 'routes' };
  invocationCounter += 1;
  const envelope = scriptedEnvelope(`act_${invocationCounter}`);
  if (call.tool === 'http_request') {
    return envelopeAnswer({
      ...envelope,
      response: {
        status: 200,
        headers: {},
        body: 'ok',
        body_encoding: 'utf8',
        truncated: false,
        total_bytes: 2,
        redacted: false,
      },
    });
  }
  if (call.tool === 'ssh_exec') {
    return envelopeAnswer({
      ...envelope,
      output: {
        exit_status: 0,
        stdout: 'ok\n',
        stdout_encoding: 'utf8',
        stderr: '',
        stderr_encoding: 'utf8',
        stdout_bytes: 3,
        stderr_bytes: 0,
        truncated: false,
        output_complete: true,
        redacted: false,
      },
    });
  }
  return envelopeAnswer(envelope);
}
