import {
  agentMcpResultSchema,
  errorCodeMeanings,
  type ActionState,
  type Channel,
  type Envelope,
  type JournalEvent,
} from '../contract/index.js';
import { bodyWithheldReasons, type BodyWithheldReason } from '../channels/http/index.js';
import type { StoredResult, StoredResultHead } from '../journal/index.js';
import type { ResultHandoff } from '../ports/index.js';
import type { ActionAnswerParts } from './agent-answers.js';

/**
 * A stored result as the agent receives it again (fetch_result): HTTP status, headers and body; or
 * SSH stdout and stderr split by the stored counts. Built from the result store only: a read.
 */
export function storedAnswerParts(
  channel: Channel,
  stored: StoredResult,
): Pick<ActionAnswerParts, 'response' | 'output' | 'mcpResult'> {
  const s = stored.summary;
  if (channel === 'mcp') return storedMcpResult(stored);
  if (channel === 'http') {
    return {
      response: {
        status: num(s['status']) ?? 0,
        headers: strings(s['headers']),
        body: stored.body,
        truncated: stored.truncated,
        total_bytes: stored.total_bytes,
        redacted: s['redacted'] === true,
        ...withheldOf(s['body_withheld']),
        ...(Array.isArray(s['content_decoded'])
          ? { content_decoded: s['content_decoded'].filter((c): c is string => typeof c === 'string') }
          : {}),
      },
    };
  }
  const stdoutStored = num(s['stdout_stored_bytes']) ?? stored.body.length;
  const exitStatus = num(s['exit_status']);
  const exitSignal = typeof s['exit_signal'] === 'string' ? s['exit_signal'] : undefined;
  return {
    output: {
      ...(exitStatus === undefined ? {} : { exit_status: exitStatus }),
      ...(exitSignal === undefined ? {} : { exit_signal: exitSignal }),
      stdout: stored.body.subarray(0, stdoutStored),
      stderr: stored.body.subarray(stdoutStored),
      stdout_bytes: num(s['stdout_bytes']) ?? stdoutStored,
      stderr_bytes: num(s['stderr_bytes']) ?? stored.body.length - stdoutStored,
      truncated: stored.truncated,
      output_complete: s['output_complete'] !== false,
      redacted: s['redacted'] === true,
    },
  };
}

function withheldOf(value: unknown): { body_withheld?: BodyWithheldReason } {
  return typeof value === 'string' && (bodyWithheldReasons as readonly string[]).includes(value)
    ? { body_withheld: value as BodyWithheldReason }
    : {};
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
}

function strings(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

/**
 * Whether a stored result passed its retention (created_at_ms + retention ≤ now): a read-time
 * check. A purged result is expired whatever the retention says now (it may have been lengthened
 * after the purge): its bytes are gone.
 */
export function resultExpired(
  head: Pick<StoredResultHead, 'created_at_ms' | 'purged_at_ms'>,
  retentionSeconds: number,
  nowMs: number,
): boolean {
  return (
    (head.purged_at_ms !== null && head.purged_at_ms !== undefined) ||
    nowMs - head.created_at_ms >= retentionSeconds * 1000
  );
}

/** When a stored result stops being fetchable. */
export function resultKeptUntilMs(head: Pick<StoredResultHead, 'created_at_ms'>, retentionSeconds: number): number {
  return head.created_at_ms + retentionSeconds * 1000;
}

/**
 * The envelope of a settled action whose stored result passed its retention: the recorded outcome
 * stands (committed or rejected), the bytes are gone, and nothing will run the action again to
 * recreate them — hence retry `never`, not `fetch_result`.
 */
export function expiredEnvelope(envelope: Envelope, state: ActionState): Envelope {
  const outcome = state.outcome ?? 'unknown';
  return {
    ...envelope,
    error: {
      code: 'RESULT_EXPIRED',
      phase: 'result_delivery',
      outcome,
      retry: 'never',
      message: errorCodeMeanings.RESULT_EXPIRED,
    },
  };
}

/**
 * fetch_result on an action whose outcome is recorded but that has no stored result to hand over: a failure like any
 * other, so it carries a code. An outcome a person attested or a reconciliation lookup answered (committed or
 * rejected: neither records a response) is RESULT_NOT_STORED, phase result_delivery, the recorded outcome, retry never,
 * with a message saying who settled it and that what was attested is in the action's record — even when the record
 * carries a code of its own: an attested rejection's ATTESTED_REJECTED (an attestation written before that code as
 * REMOTE_REJECTED folds as it too, and migration 016 recoded its stored record), or a lookup's authoritative "no
 * record" REMOTE_REJECTED (the remote answered the lookup, not the action: still no response to hand over). Any other
 * record with its own error
 * (rejected by the remote, not_attempted, unknown) answers that error unchanged. `unreadable`: a stored result exists
 * but its bytes could not be read.
 */
export function noStoredResultEnvelope(envelope: Envelope, state: ActionState, unreadable = false): Envelope {
  const settledLate =
    (state.source === 'operator_attested' || state.source === 'remote_query') &&
    (state.outcome === 'committed' || state.outcome === 'rejected');
  if (envelope.error !== undefined && !(settledLate && !unreadable)) return envelope;
  const outcome = state.outcome ?? 'unknown';
  const why = unreadable
    ? 'its stored result could not be read'
    : state.source === 'operator_attested'
      ? "it was settled by a person's attestation, not by an answer from the remote, so no response was recorded to hand over (what the person attested is in the action's record)"
      : state.source === 'remote_query'
        ? 'it was settled by a reconciliation lookup, so no response was recorded to hand over'
        : `it was settled by evidence from ${state.source ?? 'an unknown source'}, so no response was recorded to hand over`;
  return {
    ...envelope,
    error: {
      code: 'RESULT_NOT_STORED',
      phase: 'result_delivery',
      outcome,
      retry: 'never',
      message: `no stored result: the action is ${outcome} (effect ${state.effect ?? 'unknown'}, basis ${state.outcome_basis ?? 'none'}); ${why}. This read sent nothing, and the action is never run again to produce one`,
    },
  };
}

/** The handoff an answer carries when it hands over the action's committed result. */
export function handoffOf(state: ActionState | undefined): ResultHandoff | undefined {
  return state === undefined || state.result_id === null
    ? undefined
    : { action_id: state.action_id, result_id: state.result_id };
}

/**
 * The action as its committed result says, for an answer that hands that result over. A delivery
 * note (phase result_delivery, RESULT_DELIVERY_FAILED, retry fetch_result) records that an earlier
 * handoff failed; the projection keeps it as the action's last classification, but a fetch that
 * hands the result over must carry the remote's classification (a success is not an error, a 401
 * stays REMOTE_AUTH_REJECTED). Taken from the RESULT_COMMITTED event; when that is not readable
 * (a sealed journal row) the state is answered as recorded.
 */
export function committedView(state: ActionState, events: () => readonly JournalEvent[]): ActionState {
  if (state.phase !== 'result_delivery' || state.result_id === null) return state;
  let committed: JournalEvent | undefined;
  try {
    committed = events().findLast((e) => e.kind === 'RESULT_COMMITTED' && e.payload.result_id === state.result_id);
  } catch {
    return state;
  }
  const c = committed?.classification;
  if (c === undefined) return state;
  return {
    ...state,
    phase: c.phase,
    retry: c.retry,
    code: c.code,
    outcome_basis: c.outcome_basis,
    source: c.source,
    retry_after_ms: c.retry_after_ms ?? null,
  };
}

/** An upstream MCP reply as stored: the delivered JSON (already scrubbed and capped) read back, never re-asked. */
function storedMcpResult(stored: StoredResult): Pick<ActionAnswerParts, 'mcpResult'> {
  const parsed = agentMcpResultSchema.omit({ bytes: true }).safeParse(parseJson(stored.body));
  // A stored result that does not read back is answered without it; its digest in the envelope still names it.
  return parsed.success ? { mcpResult: { ...parsed.data, bytes: stored.body.length } } : {};
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}
