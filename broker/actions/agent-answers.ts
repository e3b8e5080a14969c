import {
  agentRefusal,
  agentToolReplySchema,
  type ActionState,
  type AgentRefusal,
  type AgentToolReply,
  type AgentHttpResponse,
  type AgentMcpResult,
  type AgentSshOutput,
  type CodedError,
  type Envelope,
  type ErrorCode,
  type QueuePosition,
  sessionRecordWords,
  type SessionRecordCheck,
  type SessionState,
} from '../contract/index.js';
import { sealedForGood } from '../journal/index.js';
import type { ToolAnswer, VaultState } from '../ports/index.js';
import type { HttpActionResponse } from './execute-http-action.js';
import type { SshActionOutput } from './execute-ssh-action.js';

/** A stored HTTP result as fetch_result reads it back (stored-result.ts). */
export interface StoredHttpResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  truncated: boolean;
  total_bytes: number;
  redacted: boolean;
  body_withheld?: AgentHttpResponse['body_withheld'];
  content_decoded?: readonly string[];
}

/**
 * Why a closed session refuses what its process asks: a person revoked it (SESSION_REVOKED), or the session sweeper
 * ended it because its agent process was gone (SESSION_ENDED: nobody revoked it, the caller went away). A revoked
 * session whose process then went stays revoked. `what` says what was refused; undefined while the session is open.
 * `recordOf` says how far the journal has checked the record (Journal.sessionRecordCheck), asked only of a closed one.
 */
export function closedSessionRefusal(
  session: SessionState,
  what: string,
  recordOf: () => SessionRecordCheck,
): { readonly code: 'SESSION_REVOKED' | 'SESSION_ENDED'; readonly message: string } | undefined {
  if (session.status !== 'revoked' && session.status !== 'ended') return undefined;
  const record = recordOf();
  const words = sessionRecordWords[record];
  // An earlier run's row the journal has not confirmed (THREAT-MODEL 3): refused all the same (fail closed), but never
  // told as a person's revocation or the sweeper's finding: the file says so, which any process could have written.
  if (words !== null && record !== 'approval_withheld')
    return {
      code: session.status === 'revoked' ? 'SESSION_REVOKED' : 'SESSION_ENDED',
      message: `this session's record says ${session.status} (${words}${record === 'unconfirmed' ? '; its events open only while the vault is unlocked' : ''}); ${what}`,
    };
  if (session.status === 'revoked')
    return { code: 'SESSION_REVOKED', message: `a person revoked this session; ${what}` };
  const when = session.end_reason === 'broker_found_gone' ? 'when it started' : 'while it ran';
  return {
    code: 'SESSION_ENDED',
    message:
      `this session ended: the broker found its agent process gone ${when} (nobody revoked it); ${what}. ` +
      'Start the agent again and reconnect: a new agent process gets a new session',
  };
}

/** A refusal that belongs to no action (bad read-tool arguments, a revoked session, a bad wait). */
export function refusal(
  code: ErrorCode,
  message: string,
  retry: AgentRefusal['error']['retry'],
  field?: string,
): ToolAnswer {
  const structured = agentRefusal(code, message.slice(0, 1000), retry, field);
  return { isError: true, structured: agentToolReplySchema.parse(structured), text: `${code}: ${message}` };
}

export interface ActionAnswerParts {
  readonly envelope: Envelope;
  readonly state: ActionState | undefined;
  readonly queue?: QueuePosition | null;
  readonly response?: HttpActionResponse | StoredHttpResponse;
  readonly output?:
    | SshActionOutput
    | {
        exit_status?: number;
        exit_signal?: string;
        stdout: Buffer;
        stderr: Buffer;
        stdout_bytes: number;
        stderr_bytes: number;
        truncated: boolean;
        output_complete: boolean;
        redacted: boolean;
      };
  /** An upstream MCP tool's reply, scrubbed and capped (execute-mcp-action.ts). */
  readonly mcpResult?: AgentMcpResult;
  /** Replaces the generated text's tail, e.g. "(timed out after 5000 ms; …)". */
  readonly note?: string;
}

/** An action's answer: the envelope plus ticket, lane, queue position and the result it carries. */
export function actionAnswer(p: ActionAnswerParts): ToolAnswer {
  const reply: AgentToolReply = {
    ...p.envelope,
    ticket: p.state?.ticket ?? null,
    lane: p.state?.lane ?? null,
    ...(p.queue === undefined || p.queue === null ? {} : { queue: p.queue }),
    ...(p.response === undefined ? {} : { response: httpResponse(p.response) }),
    ...(p.output === undefined ? {} : { output: sshOutput(p.output) }),
    ...(p.mcpResult === undefined ? {} : { mcp_result: p.mcpResult }),
  };
  const structured = agentToolReplySchema.parse(reply);
  const isError = p.envelope.error !== undefined || (p.envelope.effect === null && p.queue === undefined);
  return { isError, structured, text: answerText(p) };
}

/**
 * The answer's first line: "ticket #12 committed: HTTP 201", "ticket #13 waiting for approval (timed out …)",
 * "ticket #14 not_attempted: INVALID_TARGET (field route)". The socket puts it above the readable summary and
 * the reply as JSON in the text block (broker/agent/answer-text.ts), so it names only what the reply holds.
 */
function answerText(p: ActionAnswerParts): string {
  const t = `ticket #${p.state?.ticket ?? '?'}`;
  const e = p.envelope;
  let head: string;
  if (p.queue !== undefined && p.queue !== null) head = `${t} ${p.queue.text}`;
  else if (e.error !== undefined) {
    const field = e.error.field === undefined || e.error.field === '' ? '' : ` (field ${e.error.field})`;
    head = `${t} ${e.error.outcome}: ${e.error.code}${field}${e.evidence.response_status === undefined ? '' : ` (HTTP ${e.evidence.response_status})`}`;
  } else if (p.state?.outcome === 'committed' || p.state?.outcome === 'rejected') {
    const detail =
      e.evidence.response_status !== undefined
        ? `HTTP ${e.evidence.response_status}`
        : e.evidence.exit_status !== undefined
          ? `exit ${e.evidence.exit_status}`
          : p.mcpResult !== undefined
            ? `${p.mcpResult.server}.${p.mcpResult.tool}${p.mcpResult.is_error ? ' reported an error' : ' answered'}`
            : (e.effect ?? '');
    head = `${t} ${p.state.outcome}: ${detail}`;
  } else if (p.state?.dispatch_seq !== null && p.state !== undefined)
    head = `${t} dispatched, outcome not recorded yet`;
  else head = `${t} ${p.state?.outcome ?? 'waiting'}`;
  return p.note === undefined ? head : `${head} ${p.note}`;
}

function httpResponse(r: NonNullable<ActionAnswerParts['response']>): AgentHttpResponse {
  const text = utf8OrUndefined(r.body);
  return {
    status: r.status,
    headers: { ...r.headers },
    body: text ?? r.body.toString('base64'),
    body_encoding: text === undefined ? 'base64' : 'utf8',
    truncated: r.truncated,
    total_bytes: r.total_bytes,
    redacted: r.redacted,
    ...(r.body_withheld === undefined ? {} : { body_withheld: r.body_withheld }),
    ...(r.content_decoded === undefined ? {} : { content_decoded: [...r.content_decoded] }),
  };
}

/** Each stream as UTF-8 text when it is valid UTF-8, else base64, as httpResponse does: the agent gets the exact bytes. */
function sshOutput(o: NonNullable<ActionAnswerParts['output']>): AgentSshOutput {
  const stdout = utf8OrUndefined(o.stdout);
  const stderr = utf8OrUndefined(o.stderr);
  return {
    ...(o.exit_status === undefined ? {} : { exit_status: o.exit_status }),
    ...(o.exit_signal === undefined ? {} : { exit_signal: o.exit_signal }),
    stdout: stdout ?? o.stdout.toString('base64'),
    stdout_encoding: stdout === undefined ? 'base64' : 'utf8',
    stderr: stderr ?? o.stderr.toString('base64'),
    stderr_encoding: stderr === undefined ? 'base64' : 'utf8',
    stdout_bytes: o.stdout_bytes,
    stderr_bytes: o.stderr_bytes,
    truncated: o.truncated,
    output_complete: o.output_complete,
    redacted: o.redacted,
  };
}

function utf8OrUndefined(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * A refusal that passes once a person unlocks the vault: VAULT_LOCKED, and AUDIT_KEY_UNAVAILABLE while the vault is
 * locked (an earlier run's events) — unless what was read was sealed by a run that never had a key (sealedForGood: the
 * journal tells so from the plaintext audit_runs row, no secret needed), which nothing will open, locked or not.
 * Unlocked (or never initialised), AUDIT_KEY_UNAVAILABLE is always such a run.
 */
export function passesOnceUnlocked(error: CodedError, vault: VaultState): boolean {
  if (error.code === 'VAULT_LOCKED') return true;
  return error.code === 'AUDIT_KEY_UNAVAILABLE' && vault === 'locked' && !sealedForGood(error);
}
