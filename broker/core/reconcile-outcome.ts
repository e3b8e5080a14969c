import type { Classification } from '../contract/index.js';
import { resolveJsonPointer } from './json-pointer.js';
import { fillTemplate, pathTemplateParams } from './path-template.js';

/** The ids a reconciliation lookup can name the original operation by, strongest first. */
export type LookupCorrelation = 'idempotency_token' | 'operation_id' | 'provider_request_id';

/** How a reconciliation found the original: a lookup by id, or a bounded read-back (the weakest). */
export type ReconcileCorrelation = LookupCorrelation | 'bounded_read_back';

/** What the original action's record offers to correlate on. */
export interface CorrelationFacts {
  /** The key bound at admission (PREFLIGHT_VALIDATED's idempotency binding), if any. */
  readonly idempotencyKey?: string;
  /** The job id an OPERATION_SUBMITTED named, if any. */
  readonly operationId?: string;
  /** The provider's own request id (the latest REMOTE_RESPONSE_STARTED that named one), if any. */
  readonly providerRequestId?: string;
  /** The declared request fields' values journaled at admission (PREFLIGHT_VALIDATED), if any. */
  readonly correlationValues?: Readonly<Record<string, string>>;
}

export type LookupPlan =
  | { readonly ok: true; readonly correlation: LookupCorrelation; readonly path: string }
  | { readonly ok: false; readonly why: string };

type IdFact = 'idempotencyKey' | 'operationId' | 'providerRequestId';

/**
 * Which template placeholder carries which correlation, in strength order (article 003): a token
 * the target accepted, then an id it returned for the operation, then its id for the request.
 */
const placeholders: ReadonlyArray<{
  readonly name: string;
  readonly correlation: LookupCorrelation;
  readonly fact: IdFact;
}> = [
  { name: 'idempotency_key', correlation: 'idempotency_token', fact: 'idempotencyKey' },
  { name: 'operation_id', correlation: 'operation_id', fact: 'operationId' },
  { name: 'provider_request_id', correlation: 'provider_request_id', fact: 'providerRequestId' },
];

/**
 * Fills a route's lookup path template from the strongest correlation the record holds. The
 * template must bind exactly one known placeholder: a lookup that names nothing of this operation
 * (or something the broker cannot fill) could only report on some other operation, so it is no
 * evidence at all. The value is percent-encoded as one path segment: the id comes from the agent
 * (a key) or the remote (a job id, a request id), never trusted to be path-safe.
 */
export function planLookup(template: string, facts: CorrelationFacts): LookupPlan {
  const params = pathTemplateParams(template);
  const known = placeholders.filter((p) => params.includes(p.name));
  if (known.length === 0 || known.length !== params.length) {
    return {
      ok: false,
      why: 'the lookup path must bind exactly one of {idempotency_key}, {operation_id} or {provider_request_id}',
    };
  }
  for (const p of known) {
    const value = facts[p.fact];
    if (value === undefined) continue;
    return {
      ok: true,
      correlation: p.correlation,
      path: fillTemplate(template, { [p.name]: encodeURIComponent(value) }),
    };
  }
  const names = known.map((p) => `{${p.name}}`).join(' or ');
  return {
    ok: false,
    why: `the lookup needs ${names}, and this action's record holds none (no idempotency key was bound, no operation id or provider request id was returned)`,
  };
}

/**
 * What a reconciliation lookup's answer says about the original action (source remote_query).
 * `lookupStatus` is the status of the lookup's complete, settled response, or undefined when the
 * lookup has none (it was refused, failed, or its own outcome is unknown).
 *
 * - A complete 2xx: the remote holds the operation, so the original took effect (committed,
 *   succeeded, retry never). The body is not interpreted: a lookup route declares that 2xx means
 *   "found", and a remote whose found operation may itself have failed should not declare one.
 * - 404/410 under an idempotency token, when such an answer counts (`noRecordCounts`, judgeLookup: asked while the
 *   key is still within its declared retention, and long enough after the original's last attempt): the remote
 *   reports no operation under that key. This trusts the route's declared contract — that the
 *   remote records every key it accepted and keeps it for the declared retention — so the original
 *   never took effect (rejected, no_effect). After the retention an absent key proves nothing (it
 *   may have been forgotten); under an operation id the job was created, and a provider request
 *   id was issued only because the request reached the remote, so none of these settles.
 * - Anything else: inconclusive. Recorded (so the attempt is visible) with outcome unknown and
 *   retry reconcile; the action stays unknown.
 *
 * Never not_attempted: the original was dispatched, and nothing a lookup learns can undo that.
 */
export function reconcileClassification(
  lookupStatus: number | undefined,
  correlation: LookupCorrelation,
  noRecordCounts = false,
): Classification {
  const base = { phase: 'remote_execution', source: 'remote_query' } as const;
  if (lookupStatus !== undefined && lookupStatus >= 200 && lookupStatus < 300) {
    return {
      ...base,
      outcome: 'committed',
      retry: 'never',
      code: null,
      effect: 'succeeded',
      outcome_basis: 'remote_query_found',
    };
  }
  if ((lookupStatus === 404 || lookupStatus === 410) && correlation === 'idempotency_token' && noRecordCounts) {
    return {
      ...base,
      outcome: 'rejected',
      retry: 'never',
      code: 'REMOTE_REJECTED',
      effect: 'no_effect',
      outcome_basis: 'remote_query_no_record',
    };
  }
  return {
    ...base,
    outcome: 'unknown',
    retry: 'reconcile',
    code: 'REMOTE_OUTCOME_UNKNOWN',
    effect: 'unknown_effect',
    outcome_basis: 'remote_query_inconclusive',
  };
}

/** How long after the original's last attempt a lookup's "no record" starts to count, unless the route declares it. */
export const lookupNotFoundAfterSecondsDefault = 60;

/** When a lookup under an idempotency token was asked, against what the record and the route say. */
export interface NoRecordTiming {
  /** The key binding's earliest safe expiry (PREFLIGHT_VALIDATED), if a key was bound. */
  readonly keyExpiresAtMs: number | undefined;
  /** The newest event of the original's attempts (the broker's last word on them: a timeout, a cut, an answer). */
  readonly attemptEndedAtMs: number;
  /** Just before the lookup was sent. */
  readonly askedAtMs: number;
  /** Once it answered. */
  readonly answeredAtMs: number;
  /** The route's `lookup.not_found_after_seconds`, in ms. */
  readonly notFoundAfterMs: number;
}

/**
 * A lookup under an idempotency token and its answer, judged (reconcileClassification), with a note when a "no
 * record" answer was not trusted because of when it was asked. "No record" settles the original rejected only while
 * the key is within its declared retention (after it, the remote may have forgotten the key) and only once the route's
 * `not_found_after_seconds` passed since the original's last attempt ended: a request the remote received but has not
 * recorded yet (still queued or processing when the broker stopped waiting) is also "no record" at first, and would
 * then take effect after the action was recorded as having none.
 */
export function judgeLookup(
  lookupStatus: number | undefined,
  correlation: LookupCorrelation,
  timing: NoRecordTiming,
): { readonly classification: Classification; readonly note?: string } {
  const withinRetention = timing.keyExpiresAtMs !== undefined && timing.answeredAtMs < timing.keyExpiresAtMs;
  const quietMs = timing.askedAtMs - timing.attemptEndedAtMs;
  const settledLongEnough = quietMs >= timing.notFoundAfterMs;
  const classification = reconcileClassification(lookupStatus, correlation, withinRetention && settledLongEnough);
  const noRecord = (lookupStatus === 404 || lookupStatus === 410) && correlation === 'idempotency_token';
  if (!noRecord || !withinRetention || settledLongEnough) return { classification };
  return {
    classification,
    note:
      `no record under the key, asked ${seconds(quietMs)} after the original's last attempt ended; the route counts ` +
      `"no record" only from ${seconds(timing.notFoundAfterMs)} after it (lookup.not_found_after_seconds), since the ` +
      'remote may still have been receiving or processing the request: reconcile again from then',
  };
}

function seconds(ms: number): string {
  return `${Math.max(0, Math.floor(ms / 1000))} s`;
}

/** A route's bounded read-back (`correlation.read_back`), as the configuration declares it. */
export interface ReadBackSpec {
  /** Path template; each {field} is a recorded correlation value, percent-encoded as one segment. */
  readonly path: string;
  /** Query parameters; a value that is exactly {field} is filled from the recorded values. */
  readonly query: Readonly<Record<string, string>>;
  /** JSON pointer to the candidate array in the answer. */
  readonly items: string;
  /** Fields every candidate must carry with the recorded value to match. */
  readonly match: readonly string[];
  /** More candidates than this is not a narrow query: the answer proves nothing. */
  readonly items_max: number;
}

export type ReadBackPlan =
  | { readonly ok: true; readonly path: string; readonly query: Readonly<Record<string, string>> }
  | { readonly ok: false; readonly why: string };

const queryPlaceholder = /^\{([A-Za-z0-9_.-]{1,64})\}$/;

/**
 * Fills a read-back's path and query from the values the original's PREFLIGHT_VALIDATED recorded.
 * Every field the query names and every match field must be in the record: a read-back that
 * cannot filter on this request's own values, or cannot compare them, could only describe other
 * objects.
 */
export function planReadBack(spec: ReadBackSpec, values: Readonly<Record<string, string>> | undefined): ReadBackPlan {
  const recorded = values ?? {};
  const pathFields = pathTemplateParams(spec.path);
  const queryFields = Object.values(spec.query).flatMap((v) => queryPlaceholder.exec(v)?.[1] ?? []);
  const missing = [...new Set([...pathFields, ...queryFields, ...spec.match])].filter(
    (f) => !Object.hasOwn(recorded, f),
  );
  if (missing.length > 0) {
    return {
      ok: false,
      why: `the read-back needs ${missing.join(', ')}, and this action's record holds no such value (its request body did not carry it)`,
    };
  }
  const value = (f: string): string => recorded[f] as string;
  const path = fillTemplate(spec.path, Object.fromEntries(pathFields.map((f) => [f, encodeURIComponent(value(f))])));
  const query = Object.fromEntries(
    Object.entries(spec.query).map(([name, v]) => {
      const field = queryPlaceholder.exec(v)?.[1];
      return [name, field === undefined ? v : value(field)];
    }),
  );
  return { ok: true, path, query };
}

/** The read-back's own answer: its complete, settled response (undefined status when none). */
export interface ReadBackAnswer {
  readonly status: number | undefined;
  /** The stored response body as text (UTF-8). */
  readonly body: string;
  /** The body was larger than what the broker keeps. */
  readonly truncated: boolean;
}

export interface ReadBackVerdict {
  readonly classification: Classification;
  /** Why the read-back is enough, or why ambiguity remains (journaled on RECONCILIATION_RESULT). */
  readonly note: string;
  /** How many candidates matched every recorded field, of how many were read (when a list was read). */
  readonly readBack?: { readonly matched: number; readonly examined: number };
}

const noteCharsMax = 500;

/**
 * What a bounded read-back says about the original action (article 003: a read-back is the weakest
 * correlation, used only when the destination offers no token or id, and the record must say why
 * it is enough or why ambiguity remains). source remote_query; never not_attempted.
 *
 * - No complete 2xx answer: inconclusive (remote_query_inconclusive).
 * - A body the broker could not keep whole, or more candidates than `items_max`: the query did not
 *   narrow the answer to this request's values (or the remote ignores the filter), so neither a
 *   match nor its absence is evidence (remote_read_back_unbounded).
 * - Not JSON, or no array at `items`: remote_read_back_unreadable.
 * - Exactly one candidate whose every `match` field equals the recorded value (a string, or a
 *   number printed the same way): committed, succeeded (remote_read_back_match). The values were
 *   in the request the remote received and the answer was bounded; this trusts the route's
 *   declaration that the match fields identify one request's object (an external reference).
 * - No match: still unknown (remote_read_back_no_match). Absence in a read-back is not proof of no
 *   effect — the remote may list late, index differently or have removed the object.
 * - Two or more: unknown (remote_read_back_ambiguous): which one, if any, is this action's is not
 *   known.
 */
export function classifyReadBack(
  answer: ReadBackAnswer,
  spec: Pick<ReadBackSpec, 'items' | 'match' | 'items_max'>,
  values: Readonly<Record<string, string>>,
): ReadBackVerdict {
  const fields = spec.match.join(', ');
  if (answer.status === undefined || answer.status < 200 || answer.status >= 300) {
    const got = answer.status === undefined ? 'no complete answer' : `HTTP ${answer.status}`;
    return unknownVerdict(
      'remote_query_inconclusive',
      `the read-back got ${got}, so it says nothing about the original; the outcome stays unknown`,
    );
  }
  if (answer.truncated) {
    return unknownVerdict(
      'remote_read_back_unbounded',
      'the read-back answer was larger than the broker keeps, so not every candidate could be read; the outcome stays unknown',
    );
  }
  let document: unknown;
  try {
    document = JSON.parse(answer.body);
  } catch {
    return unknownVerdict('remote_read_back_unreadable', 'the read-back answer is not JSON; the outcome stays unknown');
  }
  const items = resolveJsonPointer(document, spec.items);
  if (!Array.isArray(items)) {
    return unknownVerdict(
      'remote_read_back_unreadable',
      `the read-back answer holds no array at ${spec.items === '' ? 'its root' : spec.items}; the outcome stays unknown`,
    );
  }
  const examined = items.length;
  const matched = items.filter((item) => matches(item, spec.match, values)).length;
  const readBack = { matched, examined };
  if (examined > spec.items_max) {
    return unknownVerdict(
      'remote_read_back_unbounded',
      `the read-back returned ${examined} candidates, more than items_max ${spec.items_max}: the query did not narrow the answer to this request's values, so neither a match nor its absence is evidence; the outcome stays unknown`,
      readBack,
    );
  }
  if (matched === 1) {
    return {
      classification: {
        ...readBackBase,
        outcome: 'committed',
        retry: 'never',
        code: null,
        effect: 'succeeded',
        outcome_basis: 'remote_read_back_match',
      },
      note: clip(
        `exactly one of ${examined} candidates read back carries the recorded ${fields}; those values were in the request the remote received and the answer was bounded (at most ${spec.items_max}), so that object is this action's effect`,
      ),
      readBack,
    };
  }
  if (matched === 0) {
    return unknownVerdict(
      'remote_read_back_no_match',
      `none of ${examined} candidates read back carries the recorded ${fields}; absence in a read-back is not proof of no effect (the remote may list late, index differently or have removed the object), so the outcome stays unknown`,
      readBack,
    );
  }
  return unknownVerdict(
    'remote_read_back_ambiguous',
    `${matched} of ${examined} candidates read back carry the recorded ${fields}: which one, if any, is this action's effect is ambiguous, so the outcome stays unknown`,
    readBack,
  );
}

const readBackBase = { phase: 'remote_execution', source: 'remote_query' } as const;

function unknownVerdict(
  basis: string,
  note: string,
  readBack?: { matched: number; examined: number },
): ReadBackVerdict {
  return {
    classification: {
      ...readBackBase,
      outcome: 'unknown',
      retry: 'reconcile',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      effect: 'unknown_effect',
      outcome_basis: basis,
    },
    note: clip(note),
    ...(readBack === undefined ? {} : { readBack }),
  };
}

/** A candidate matches when every match field is its own property equal to the recorded value. */
function matches(item: unknown, fields: readonly string[], values: Readonly<Record<string, string>>): boolean {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return false;
  return fields.every((f) => {
    if (!Object.hasOwn(item, f) || !Object.hasOwn(values, f)) return false;
    const v = (item as Record<string, unknown>)[f];
    const text = typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
    return text !== undefined && text === values[f];
  });
}

function clip(note: string): string {
  return note.length <= noteCharsMax ? note : `${note.slice(0, noteCharsMax - 1)}…`;
}
