import type { BatchMember, BatchOutcome, Classification } from '../contract/index.js';
import { resolveJsonPointer } from './json-pointer.js';

/** A route's declared batch shape (config `routes[].batch`): where members, ids and statuses are. */
export interface BatchShape {
  readonly request: { readonly members: string; readonly id: string };
  readonly response: {
    readonly members: string;
    readonly id: string;
    readonly status: string;
    readonly succeeded: readonly string[];
    readonly rejected: readonly string[];
  };
}

export interface BatchEvidence {
  readonly shape: BatchShape;
  /** The request body as sent (the agent's JSON; never holds the credential). */
  readonly requestBody: Uint8Array;
  /** The complete response: its framing completed (the caller settled it). */
  readonly response: { readonly status: number; readonly body: Uint8Array; readonly truncated: boolean };
  /** What classifyOutcome concluded about the request as a whole: committed or rejected. */
  readonly parent: Classification;
  /** A declared idempotency contract, a key bound before dispatch, and its retention not yet over. */
  readonly sameKeyRetryAllowed: boolean;
}

export interface BatchVerdict {
  readonly batch: BatchOutcome;
  /** The parent classification to record (the parent's, with the members' effect folded in). */
  readonly classification: Classification;
}

/** More members than this are not itemized: the record says so instead of keeping a prefix. */
export const batchMembersMax = 1000;
/** A member id longer than this cannot be recorded, so it cannot be matched either. */
export const batchIdCharsMax = 200;
/** A member status is recorded when it is at most this many characters. */
export const batchStatusCharsMax = 100;

type MemberVerdict = Pick<BatchMember, 'outcome' | 'effect' | 'retry'>;

const succeededMember: MemberVerdict = { outcome: 'committed', effect: 'succeeded', retry: 'never' };
const rejectedMember: MemberVerdict = { outcome: 'rejected', effect: 'rejected', retry: 'after_correction' };
// A complete remote failure result for one member: it may still have changed state (like a 500).
const failedMember: MemberVerdict = { outcome: 'committed', effect: 'failed', retry: 'never' };

/**
 * One outcome per member of a declared batch, and the parent classification to record beside them
 * (article 000: a parent transport result plus one outcome per member, never one retry value for
 * the whole batch). Pure: the same bytes and classification always give the same verdict.
 *
 * Per member, only what the complete response says about that member decides it: a `succeeded`
 * status is committed/succeeded, a `rejected` status rejected/rejected, any other status
 * committed/failed (a remote failure may still have changed state). A member the response does not
 * decide is unknown: `same_idempotency_key` where the contract allows it, else `reconcile`.
 *
 * The parent keeps its outcome; the members' results refine its effect (partial_effect when some
 * succeeded and some did not). Two exceptions follow from the outcome contract: a complete refusal
 * (rejected) covers every member the body does not contradict, and a refusal whose body reports
 * members that took effect is no refusal of the whole — it is recorded committed, since `rejected`
 * claims no success.
 */
export function classifyBatch(e: BatchEvidence): BatchVerdict {
  const parent = e.parent;
  if (parent.outcome !== 'committed' && parent.outcome !== 'rejected') {
    throw new Error(`classifyBatch: the parent must be settled (committed or rejected), not ${parent.outcome}`);
  }
  const requested = requestIds(e.shape, e.requestBody);
  if (!requested.ok) return notItemized(parent, requested.basis);
  const ids = requested.ids;
  const undecided: MemberVerdict = {
    outcome: 'unknown',
    effect: 'unknown_effect',
    retry: e.sameKeyRetryAllowed ? 'same_idempotency_key' : 'reconcile',
  };
  const reported = e.response.truncated
    ? { ok: false as const, basis: 'batch_response_truncated' }
    : responseStatuses(e.shape, e.response.body, new Set(ids));
  const decide = (id: string): BatchMember => {
    if (!reported.ok) return { id, ...undecided };
    const status = reported.statuses.get(id);
    if (status === undefined || status === ambiguous) return { id, ...undecided };
    const verdict = e.shape.response.succeeded.includes(status)
      ? succeededMember
      : e.shape.response.rejected.includes(status)
        ? rejectedMember
        : failedMember;
    // A longer status is not cut (a cut could keep part of an echoed secret): it is left out.
    return status.length > batchStatusCharsMax ? { id, ...verdict } : { id, ...verdict, status };
  };
  const members = ids.map(decide);
  const committed = members.filter((m) => m.outcome === 'committed');
  if (parent.outcome === 'rejected' && committed.length === 0) return refusedAsWhole(parent, members);
  const succeeded = members.filter((m) => m.effect === 'succeeded');
  const batch: BatchOutcome = { members, completed_ids: succeeded.map((m) => m.id) };
  const decided = members.filter((m) => m.outcome !== 'unknown').length;
  if (decided === 0) {
    // Nothing itemized: the transport result stands; the basis says why the members stay unknown.
    const basis = reported.ok
      ? members.length === 0
        ? parent.outcome_basis
        : 'batch_no_member_decided'
      : reported.basis;
    return { batch, classification: { ...parent, outcome_basis: basis } };
  }
  // From here the response decided at least one member: re-sending the whole batch would repeat
  // it, so the parent's retry is never and each member's own retry says what may happen next.
  const folded: Classification = { ...parent, outcome: 'committed', retry: 'never' };
  delete folded.retry_after_ms;
  if (succeeded.length === members.length)
    return { batch, classification: { ...folded, effect: 'succeeded', outcome_basis: 'batch_all_members_succeeded' } };
  if (succeeded.length > 0)
    return { batch, classification: { ...folded, effect: 'partial_effect', outcome_basis: 'batch_partial_effect' } };
  return { batch, classification: { ...folded, effect: 'failed', outcome_basis: 'batch_no_member_succeeded' } };
}

/** The request's members could not be listed (or were too many): no member outcomes, and why. */
function notItemized(parent: Classification, basis: string): BatchVerdict {
  const batch: BatchOutcome = { members: [], completed_ids: [] };
  // A complete refusal needs no itemizing: nothing took effect, and its own basis says why.
  if (parent.outcome === 'rejected') return { batch, classification: parent };
  return { batch, classification: { ...parent, outcome_basis: basis } };
}

/**
 * A complete refusal whose body reports no member as committed: it claims no success for any of
 * them, so members the body does not decide share the refusal (a 401 refuses every member). The
 * member retry is the parent's where the member set has it; a whole-batch backoff stays the
 * parent's (re-sending the batch later), the member waits for that: after_correction.
 */
function refusedAsWhole(parent: Classification, members: readonly BatchMember[]): BatchVerdict {
  const retry: BatchMember['retry'] = parent.retry === 'never' ? 'never' : 'after_correction';
  const refused = members.map((m): BatchMember =>
    m.outcome === 'unknown' ? { id: m.id, outcome: 'rejected', effect: 'rejected', retry } : m,
  );
  return { batch: { members: refused, completed_ids: [] }, classification: parent };
}

type Listed = { ok: true; ids: string[] } | { ok: false; basis: string };

function requestIds(shape: BatchShape, body: Uint8Array): Listed {
  const document = parseJson(body);
  if (document === undefined) return { ok: false, basis: 'batch_request_not_json' };
  const list = resolveJsonPointer(document.value, shape.request.members);
  if (!Array.isArray(list)) return { ok: false, basis: 'batch_request_members_not_found' };
  if (list.length > batchMembersMax) return { ok: false, basis: 'batch_too_large_to_itemize' };
  const ids: string[] = [];
  for (const member of list) {
    const id = memberField(member, shape.request.id);
    if (id === undefined || id.length > batchIdCharsMax)
      return { ok: false, basis: 'batch_request_member_ids_unusable' };
    ids.push(id);
  }
  // Two members with one id cannot be told apart in the response: none of them is itemized.
  if (new Set(ids).size !== ids.length) return { ok: false, basis: 'batch_request_member_ids_not_unique' };
  return { ok: true, ids };
}

/** A response entry named the same member twice: it decides neither. */
const ambiguous = Symbol('ambiguous');
type Reported = { ok: true; statuses: Map<string, string | typeof ambiguous> } | { ok: false; basis: string };

function responseStatuses(shape: BatchShape, body: Uint8Array, requested: ReadonlySet<string>): Reported {
  const document = parseJson(body);
  if (document === undefined) return { ok: false, basis: 'batch_response_not_json' };
  const list = resolveJsonPointer(document.value, shape.response.members);
  if (!Array.isArray(list)) return { ok: false, basis: 'batch_response_members_not_found' };
  const statuses = new Map<string, string | typeof ambiguous>();
  for (const entry of list) {
    const id = memberField(entry, shape.response.id);
    // Entries for members the request did not name say nothing about the ones it did.
    if (id === undefined || !requested.has(id)) continue;
    const status = memberField(entry, shape.response.status);
    // An entry without a status names the member but does not decide it.
    if (status === undefined) continue;
    statuses.set(id, statuses.has(id) ? ambiguous : status);
  }
  return { ok: true, statuses };
}

/** A member's field as a string: strings as they are (non-empty), finite numbers stringified. */
function memberField(member: unknown, field: string): string | undefined {
  if (typeof member !== 'object' || member === null || Array.isArray(member) || !Object.hasOwn(member, field))
    return undefined;
  const value = (member as Record<string, unknown>)[field];
  if (typeof value === 'string') return value.length === 0 ? undefined : value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/** Strict UTF-8 JSON, or undefined. Wrapped so that a body that is JSON `null` is still a value. */
function parseJson(bytes: Uint8Array): { value: unknown } | undefined {
  const text = decodeUtf8(bytes);
  if (text === undefined) return undefined;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * Strict UTF-8 without TextDecoder (not in the pure layer's lib): every byte that is not plain
 * ASCII is percent-encoded and decodeURIComponent decodes it, throwing on any invalid sequence
 * (overlong forms and surrogates included).
 */
function decodeUtf8(bytes: Uint8Array): string | undefined {
  const parts: string[] = [];
  const chunkBytes = 8192;
  for (let from = 0; from < bytes.length; from += chunkBytes) {
    const slice = bytes.subarray(from, from + chunkBytes);
    if (slice.every((byte) => byte < 0x80 && byte !== 0x25)) {
      parts.push(String.fromCharCode(...slice));
      continue;
    }
    let chunk = '';
    for (const byte of slice)
      chunk += byte < 0x80 && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).padStart(2, '0')}`;
    parts.push(chunk);
  }
  try {
    return decodeURIComponent(parts.join(''));
  } catch {
    return undefined;
  }
}
