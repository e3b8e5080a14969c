/**
 * The last two steps of one HTTP attempt, shared by the first run and the retry path through dispatch (http-steps.ts):
 * record (the channel's report classified by broker/core and made durable: the result rows with the RESULT_COMMITTED
 * naming them, one transaction, or OUTCOME_RECORDED) and answer (the envelope of what was recorded). Also the answers given without an attempt's record:
 * a pre-dispatch refusal, a closed ticket, and settle's closed-or-unknown after a journal failure.
 */
import type { HttpChannelReport } from '../channels/http/index.js';
import type { Route } from '../config/index.js';
import { errorCodeMeanings, type ActionState, type Classification } from '../contract/index.js';
import {
  classifyBatch,
  classifyOutcome,
  earlierAttemptUnknown,
  httpReportEvidence,
  refusedRequestField,
  type BatchVerdict,
  type LocalGate,
} from '../core/index.js';
import { buildHttpEnvelope, type EnvelopeFacts } from './http-envelope.js';
import type { SettleAnswers } from './settle.js';
import { appendResultCommitted, appendState, closedFacts, logRecorded, refusalFacts } from './record-refusal.js';
import type { SecretScrubber } from './secret-scrubber.js';
import { deliveredResponse, diagnosticBody, type HttpActionResponse } from './delivered-response.js';
import type { Bound, HttpActionDeps, HttpActionResult } from './http-action-deps.js';

/** What record made durable, for answer. */
export interface Recorded {
  readonly state: ActionState;
  readonly classification: Classification;
  /** A complete response the classification settled (committed or rejected): delivered as the result. */
  readonly settled: boolean;
  readonly result?: HttpActionResponse;
  readonly resultId?: string;
  readonly batch?: BatchVerdict['batch'];
}

/**
 * The result a complete response would be delivered as (decoded, scrubbed, capped), or undefined when the response is
 * incomplete (it can only be a diagnostic). Computed BEFORE settle (settle.ts): the scrub gives the event loop turns
 * (delivered-response.ts), and nothing may wait between settle's check of the held observations and the settlement's
 * append; so record() appends without waiting, and the record is committed only after its scrub completed.
 */
export async function deliverable(
  deps: HttpActionDeps,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
): Promise<HttpActionResponse | undefined> {
  const response = report.response;
  if (response === undefined || !response.framingComplete) return undefined;
  return deliveredResponse(response, scrubber, deps.channel.limits);
}

/** Record: what the channel observed, classified (broker/core) and made durable; `delivered` is deliverable()'s. */
export async function record(
  deps: HttpActionDeps,
  b: Bound,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
  delivered: HttpActionResponse | undefined,
): Promise<Recorded> {
  const nowMs = deps.clock.nowMs();
  // The expiry the journal holds for this key (PREFLIGHT_VALIDATED), not a recomputed one.
  const expiryMs = b.binding?.expires_at_ms;
  const response = report.response;
  const location = response?.headers.location;
  const crossOrigin = location === undefined ? false : otherOrigin(location, b.route);
  const lastAttempt = report.attempts.at(-1)?.n;
  const before = deps.journal.getAction(b.actionId);
  const evidence = httpReportEvidence(report, {
    locationElsewhere: crossOrigin,
    idempotent: b.idempotent,
    ...(before !== undefined && lastAttempt !== undefined && earlierAttemptUnknown(before, lastAttempt)
      ? { earlierAttemptUnknown: true }
      : {}),
    ...(expiryMs === undefined ? {} : { keyExpiresAtMs: expiryMs }),
    nowMs,
    retryAfterMsMax: deps.channel.limits.retryAfterMsMax,
  });
  const classification = classifyOutcome(evidence);
  // deliverable() delivered exactly the complete responses.
  const settled =
    response !== undefined &&
    response.framingComplete &&
    delivered !== undefined &&
    (classification.outcome === 'committed' || classification.outcome === 'rejected');
  if (!settled || lastAttempt === undefined) {
    const state = await appendState(
      deps.journal,
      {
        kind: 'OUTCOME_RECORDED',
        action_id: b.actionId,
        payload: lastAttempt === undefined ? {} : { attempt: lastAttempt },
        classification,
      },
      // The observations the channel still holds ride in this commit (settle.ts).
      { withHeld: true },
    );
    log(deps, b.actionId, b.route.name, classification);
    return { state, classification, settled };
  }
  const committed = await commitResult(deps, b, scrubber, {
    result: delivered,
    attempt: lastAttempt,
    classification,
    summary: (result) => resultSummary(result, crossOrigin, report.peerFingerprint),
    nowMs,
  });
  log(deps, b.actionId, b.route.name, committed.classification);
  return { ...committed, settled };
}

/**
 * A settled response: the retrievable result and the RESULT_COMMITTED naming it in one transaction, so the event never
 * names a result that is not durable (article 000's order), then a 202's OPERATION_SUBMITTED. A declared batch's member outcomes may change the classification recorded.
 */
async function commitResult(
  deps: HttpActionDeps,
  b: Bound,
  scrubber: SecretScrubber,
  settled: {
    result: HttpActionResponse;
    attempt: number;
    classification: Classification;
    summary: (result: HttpActionResponse) => Record<string, unknown>;
    nowMs: number;
  },
): Promise<Omit<Recorded, 'settled'>> {
  const { attempt, nowMs } = settled;
  const expiryMs = b.binding?.expires_at_ms;
  let classification = settled.classification;
  let batch: BatchVerdict['batch'] | undefined;
  const result = settled.result;
  const resultId = `res_${b.actionId.slice(4)}_${attempt}`;
  const stored = {
    result_id: resultId,
    action_id: b.actionId,
    attempt,
    summary: settled.summary(result),
    body: result.body,
    total_bytes: result.total_bytes,
    truncated: result.truncated,
    digest: result.digest,
    created_at_ms: nowMs,
  };
  if (b.route.batch !== undefined) {
    // A declared batch: the parent transport result plus one outcome per member (article 000).
    const sameKeyRetryAllowed =
      b.binding !== undefined && b.route.idempotency !== undefined && expiryMs !== undefined && nowMs < expiryMs;
    ({ batch, classification } = batchVerdict(
      b.route.batch,
      b.request.body,
      result,
      classification,
      sameKeyRetryAllowed,
      scrubber,
    ));
  }
  let state = await appendResultCommitted(deps, stored, {
    kind: 'RESULT_COMMITTED',
    action_id: b.actionId,
    // The digest of the result as stored and delivered (scrubbed); the wire digest is REMOTE_RESPONSE_COMPLETE's.
    payload: { attempt, result_id: resultId, result_digest: result.digest, ...(batch === undefined ? {} : { batch }) },
    classification,
  });
  if (result.status === 202) {
    // A 202 settles the submission only; the job it created is tracked as its own operation.
    const ids = submissionIds(result);
    const statusLocation = ids.operation_location ?? ids.location;
    if (ids.job_id !== undefined || statusLocation !== undefined) {
      state = await appendState(deps.journal, {
        kind: 'OPERATION_SUBMITTED',
        action_id: b.actionId,
        payload: {
          attempt,
          result_id: resultId,
          ...(ids.job_id === undefined ? {} : { job_id: ids.job_id }),
          ...(statusLocation === undefined ? {} : { status_location: statusLocation.slice(0, 2048) }),
        },
      });
    }
  }
  return { state, classification, result, resultId, ...(batch === undefined ? {} : { batch }) };
}

/** Answer: the envelope of what was recorded, the delivered result, or an incomplete response's marked diagnostic. */
export async function answer(
  deps: HttpActionDeps,
  b: Bound,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
  r: Recorded,
): Promise<HttpActionResult> {
  const { state, classification, result, resultId, batch } = r;
  const response = report.response;
  const facts: EnvelopeFacts = {
    state,
    classification,
    message:
      report.requestRefused !== undefined
        ? `the request as it would be sent (credential injected) is not valid HTTP, so nothing was sent: ${report.requestRefused.why}`
        : classification.code === null
          ? ''
          : errorCodeMeanings[classification.code],
    report,
    ...(report.stoppedBeforeDispatch === 'request_refused' ? { field: refusedRequestField(report) } : {}),
    ...(resultId === undefined || result === undefined ? {} : { resultId, resultDigest: result.digest }),
    ...(batch === undefined ? {} : { batch }),
    ...(b.binding === undefined
      ? {}
      : {
          idempotency: {
            key: b.binding.key,
            scope: b.binding.scope,
            fingerprint: b.binding.fingerprint,
            remote_contract: 'configured' as const,
            earliest_safe_expiry_ms: b.binding.expires_at_ms,
          },
        }),
  };
  const envelope = buildHttpEnvelope(facts);
  const diagnostic =
    response !== undefined && !r.settled
      ? {
          kind: 'incomplete_response_partial_body' as const,
          status: response.status,
          // After the record is committed (nothing of this is kept): scrubbed in slices like a result.
          body: await diagnosticBody(response, scrubber, deps.channel.limits.diagnosticBytesMax),
        }
      : undefined;
  return {
    envelope,
    ...(result === undefined ? {} : { response: result }),
    ...(diagnostic === undefined ? {} : { diagnostic }),
  };
}

/** The answers settle (settle.ts) gives without this attempt's record: the closure that won, or unknown. */
export function httpAnswers(b: Bound, report: HttpChannelReport): SettleAnswers<HttpActionResult> {
  return {
    closed: (state) => ({ envelope: closedEnvelope(state, b.fingerprint) }),
    unknown: (facts) => ({ envelope: buildHttpEnvelope({ ...facts, report, fingerprint: b.fingerprint }) }),
  };
}

/** A pre-dispatch refusal (record-refusal.ts), answered with its envelope. */
export async function refuse(
  deps: HttpActionDeps,
  actionId: string,
  fingerprint: string,
  gate: LocalGate,
  message: string,
): Promise<HttpActionResult> {
  return { envelope: buildHttpEnvelope(await refusalFacts(deps, 'http', actionId, { gate, message, fingerprint })) };
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded envelope. */
export function closedEnvelope(state: ActionState, fingerprint: string): HttpActionResult['envelope'] {
  return buildHttpEnvelope(closedFacts(state, fingerprint));
}

export function log(deps: HttpActionDeps, actionId: string, route: string | undefined, c: Classification): void {
  // Only ids and closed-set values: never paths, headers, bodies or credential names.
  logRecorded(deps.logger, { action_id: actionId, route }, c, 'http action recorded');
}

function resultSummary(r: HttpActionResponse, crossOrigin: boolean, peer: string | undefined): Record<string, unknown> {
  const summary: Record<string, unknown> = {
    status: r.status,
    headers: r.headers,
    body_bytes: r.total_bytes,
    stored_bytes: r.body.length,
    truncated: r.truncated,
    digest: r.digest,
    redacted: r.redacted,
  };
  if (r.body_withheld !== undefined) summary.body_withheld = r.body_withheld;
  if (r.content_decoded !== undefined) summary.content_decoded = r.content_decoded;
  if (peer !== undefined) summary.peer_identity = peer;
  if (r.status === 202) summary.submission = submissionIds(r);
  if (r.status >= 300 && r.status < 400 && r.headers.location !== undefined) {
    summary.redirect = { location: r.headers.location, cross_origin: crossOrigin, followed: false };
  }
  return summary;
}

/** 202: the job the submission created, to be tracked as a separate operation. */
function submissionIds(r: HttpActionResponse): Record<string, string> {
  // An empty id or location is no handle (and OPERATION_SUBMITTED's schema refuses it): skipped.
  const ids: Record<string, string> = {};
  const location = r.headers.location?.trim();
  const operationLocation = r.headers['operation-location']?.trim();
  if (location !== undefined && location !== '') ids.location = location;
  if (operationLocation !== undefined && operationLocation !== '') ids.operation_location = operationLocation;
  if (!r.truncated && r.body.length <= 64 * 1024 && /json/i.test(r.headers['content-type'] ?? '')) {
    try {
      const parsed = JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
      for (const k of ['job_id', 'jobId', 'operation_id', 'id']) {
        const v = parsed[k];
        if (typeof v === 'string' && v.trim() !== '' && v.length <= 200) {
          ids.job_id = v;
          break;
        }
      }
    } catch {
      // Not JSON after all: the Location is the handle.
    }
  }
  return ids;
}

function otherOrigin(location: string, route: Route): boolean {
  try {
    return new URL(location, route.origin).origin !== route.origin;
  } catch {
    return true;
  }
}

/**
 * A declared batch's member outcomes and the parent classification to record (broker/core
 * classifyBatch). Member ids and statuses come from the request too, so they are scrubbed of any
 * echoed secret before they are recorded.
 */
function batchVerdict(
  shape: NonNullable<Route['batch']>,
  requestBody: Buffer,
  response: HttpActionResponse,
  parent: Classification,
  sameKeyRetryAllowed: boolean,
  scrubber: SecretScrubber,
): BatchVerdict {
  // Judged over the body as delivered (decoded, scrubbed): member ids then need no second pass over the raw bytes.
  const verdict = classifyBatch({
    shape,
    requestBody,
    response: { status: response.status, body: response.body, truncated: response.truncated },
    parent,
    sameKeyRetryAllowed,
  });
  const clean = (text: string, charsMax: number): string => scrubber.scrubText(text, charsMax).text;
  return {
    classification: verdict.classification,
    batch: {
      members: verdict.batch.members.map((m) => ({
        ...m,
        id: clean(m.id, 200),
        ...(m.status === undefined ? {} : { status: clean(m.status, 100) }),
      })),
      completed_ids: verdict.batch.completed_ids.map((id) => clean(id, 200)),
    },
  };
}
