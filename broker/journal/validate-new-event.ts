import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import {
  classificationSchema,
  CodedError,
  eventPayloadSchemas,
  isConfigEventKind,
  isCredentialRequestEventKind,
  isSessionEventKind,
  newEventSchema,
  type NewEvent,
} from '../contract/index.js';
import { callerGoneCodes, callerStopCodes } from '../core/index.js';

/**
 * Checks an event against the contract schemas before it can be queued and returns the parsed
 * event, which is what gets stored: payload schemas refuse unnamed fields and the envelope drops
 * them, so only declared fields (ids, tags, digests) ever reach the journal. The message names the
 * field, never its value, since a wrong value might be a secret.
 */
export function validateNewEvent(input: unknown): NewEvent {
  const envelope = newEventSchema.safeParse(input);
  if (!envelope.success) throw invalid(envelope.error, []);
  const kind = envelope.data.kind;
  requireSubjectPrefix(envelope.data);
  const payload = eventPayloadSchemas[kind].safeParse(envelope.data.payload);
  if (!payload.success) throw invalid(payload.error, ['payload']);
  const event = { ...envelope.data, payload: payload.data } as NewEvent;
  requireCancellerCode(event);
  refuseAttestedAsRemote(event);
  return event;
}

/**
 * How the journal checks the events it is given (JournalOpenOptions.eventChecks):
 * - `full`: every event through the contract's schemas (validateNewEvent).
 * - `shapes`: an event whose kind and shape (shapeOf: its keys at every depth, each value's type, each short array's
 *   length) the schemas accepted before, returning it unchanged, skips them; any other shape goes through them, and is
 *   remembered once they accept it unchanged. The checks that no schema states (the subject's prefix, a canceller's
 *   code, an attested rejection) run on every event. What it leaves to the broker's own code and its tests: the values
 *   inside a known shape (a string's length or pattern, an enum member, a long array's length). Every value an agent,
 *   a person or a remote gives is bounded before it is made into an event (by the agent and operator API schemas, or
 *   where the broker reads it), not by these schemas alone.
 * - `both`: `shapes`, and every event through the schemas as well; an event of a known shape that the schemas refuse,
 *   or rewrite, is the broker's bug and throws (`EventChecksDisagree`), and every event handed back as the caller's
 *   own object is frozen, so a caller that changes it after appending throws. So does an event of a new shape that the
 *   schemas refuse for its values alone (valueIssuesOnly): production refuses it only while its shape is new, and
 *   stores it once another event has taught the shape, so a test that passes on its refusal depends on its order. A
 *   test that means to feed the journal a bad value asks for `full`. The test suites run this way (vitest.config.ts
 *   sets POSTERN_EVENT_CHECKS).
 *
 * Either way an unnamed field never reaches the journal: a shape names every key, so a key the schemas never accepted
 * makes a new shape, and a new shape is checked in full (an unnamed envelope key is dropped, as the schemas do). Only
 * plain data has a shape: anything else (a class instance, a `toJSON`, a non-finite number) is checked every time.
 */
export type EventChecks = 'full' | 'shapes' | 'both';

/** The default: `shapes`, unless POSTERN_EVENT_CHECKS names another mode (the test suites' `both`). */
export function eventChecksFromEnv(env: NodeJS.ProcessEnv = process.env): EventChecks {
  const named = env['POSTERN_EVENT_CHECKS'];
  return named === 'full' || named === 'both' ? named : 'shapes';
}

/**
 * How many shapes a checker remembers per event kind; past it, that kind's new shapes are checked in full every time
 * (a bound, not a cache: the shapes an agent's input can vary, such as which of its query pairs are long, never crowd
 * out another kind's).
 */
export const eventShapesPerKindMax = 512;

/**
 * Thrown in `both` mode when the shape check would have accepted what the schemas refuse or rewrite: an event of a
 * known shape, or one of a new shape whose values alone the schemas refuse (`known` false), which production stores
 * once its shape is known. The detail names the field, never its value.
 */
export class EventChecksDisagree extends Error {
  constructor(kind: unknown, detail: string, known = true) {
    super(
      known
        ? `event checks disagree on a ${String(kind)} event of a known shape: ${detail}`
        : `event checks disagree on a ${String(kind)} event of a new shape: ${detail}; only its values are refused, which production stores once an event of this shape is accepted (bound the value where it enters; a test of the schemas' refusal asks for eventChecks 'full')`,
    );
  }
}

/** The journal's check of each new event, in one of the EventChecks modes. */
export class NewEventChecker {
  /** The shapes the schemas accepted unchanged, by kind. */
  private readonly shapes = new Map<string, Set<string>>();

  constructor(
    readonly mode: EventChecks,
    private readonly shapesPerKindMax = eventShapesPerKindMax,
  ) {}

  check(input: unknown): NewEvent {
    const kind = (input as { kind?: unknown } | null | undefined)?.kind;
    if (this.mode === 'full' || typeof kind !== 'string') return validateNewEvent(input);
    const shape = shapeOf(input);
    const known = this.shapes.get(kind);
    const isKnown = known?.has(shape) === true;
    if (isKnown && this.mode === 'shapes') return checkBeyondSchemas(input as NewEvent);
    let event: NewEvent;
    try {
      event = validateNewEvent(input);
    } catch (error) {
      // A known shape the schemas refuse is a disagreement unless the checks beyond them refuse it too.
      if (isKnown) {
        checkBeyondSchemas(input as NewEvent);
        throw new EventChecksDisagree(kind, errorText(error));
      }
      // A new shape refused for its values alone is one another event could teach: production would then store it.
      if (this.mode === 'both' && couldBeRemembered(input, shape) && valueIssuesOnly(input)) {
        checkBeyondSchemas(input as NewEvent);
        throw new EventChecksDisagree(kind, errorText(error), false);
      }
      throw error;
    }
    if (isKnown) {
      if (!isDeepStrictEqual(event, input)) throw new EventChecksDisagree(event.kind, 'the schemas rewrite it');
      // What `shapes` returns for a known shape: the caller's own object (frozen here: changed after, it would be
      // stored changed and unchecked).
      return deepFreeze(input) as NewEvent;
    }
    const room = (known?.size ?? 0) < this.shapesPerKindMax;
    if (room && !shape.includes('!') && isDeepStrictEqual(event, input)) {
      if (known === undefined) this.shapes.set(kind, new Set([shape]));
      else known.add(shape);
    }
    return event;
  }
}

/** A known shape's event: what validateNewEvent checks beyond the schemas. */
function checkBeyondSchemas(event: NewEvent): NewEvent {
  requireSubjectPrefix(event);
  requireCancellerCode(event);
  refuseAttestedAsRemote(event);
  return event;
}

/**
 * Whether the checker could ever remember `shape`, were the schemas to accept an event of it: only plain data has one,
 * and only an event the schemas return unchanged teaches it, which one with a key the envelope or its classification
 * drops (they are not strict) never is.
 */
function couldBeRemembered(input: unknown, shape: string): boolean {
  if (shape.includes('!')) return false;
  const event = input as Record<string, unknown>;
  if (!Object.keys(event).every((key) => Object.hasOwn(newEventSchema.shape, key))) return false;
  const classification = event['classification'];
  if (classification === null || typeof classification !== 'object') return true;
  return Object.keys(classification).every((key) => Object.hasOwn(classificationSchema.shape, key));
}

/** A zod issue and where its path starts in the event (the payload's schema reports paths inside the payload). */
interface PlacedIssue {
  readonly issue: z.core.$ZodIssue;
  readonly at: readonly PropertyKey[];
}

/**
 * Every issue the schemas find in an event: the envelope's, and the payload's whenever the kind names a schema (even
 * when the envelope failed too, which validateNewEvent never reaches: a payload's unnamed key there still makes the
 * shape one the schemas never accept).
 */
function schemaIssues(input: unknown): PlacedIssue[] {
  const out: PlacedIssue[] = [];
  const envelope = newEventSchema.safeParse(input);
  if (!envelope.success) for (const issue of envelope.error.issues) out.push({ issue, at: [] });
  const event = input as { kind?: unknown; payload?: unknown } | null | undefined;
  const kind = event?.kind;
  if (typeof kind === 'string' && Object.hasOwn(eventPayloadSchemas, kind)) {
    const payload = eventPayloadSchemas[kind as keyof typeof eventPayloadSchemas].safeParse(event?.payload);
    if (!payload.success) for (const issue of payload.error.issues) out.push({ issue, at: ['payload'] });
  }
  return out;
}

/**
 * Whether the schemas refuse an event (`input`) for its values alone: some issue, and every one of them one that an
 * event of the same shape (shapeOf) could avoid by another value. From zod 4's issue codes, given the value at the
 * issue's path:
 * - a value's: `too_big`/`too_small` (a string's length, a number's range; an array's length only past
 *   exactArrayMax, where the shape keeps no length), `invalid_format` (a pattern, a format), `not_multiple_of`,
 *   `invalid_type` for `int` given a finite number (1.5 and 1 share a shape), `invalid_value` when an allowed value
 *   has the given value's shape (another member of an enum, not a number for a string literal), `custom` (a
 *   refinement; the contract has none), and an `invalid_union` that some option refuses for values alone (or a
 *   discriminator's value of an option's shape, or several options matching);
 * - a shape's: `unrecognized_keys` and `invalid_key` (keys are in the shape), `invalid_type` otherwise (a missing
 *   key, a string for a number, an array for an object), `too_big`/`too_small` on an array of up to exactArrayMax
 *   elements (a tuple's or a short list's length is in the shape), `invalid_element` (a Map or Set, never plain data),
 *   and any issue at `kind` (shapes are remembered per kind, and the schemas never accept a kind their enum refuses, so
 *   no shape is ever remembered under it).
 */
export function valueIssuesOnly(input: unknown): boolean {
  const issues = schemaIssues(input);
  return issues.length > 0 && issues.every(({ issue, at }) => isValueIssue(issue, at, input));
}

function isValueIssue(issue: z.core.$ZodIssue, at: readonly PropertyKey[], root: unknown): boolean {
  const path = [...at, ...issue.path];
  if (path.length === 1 && path[0] === 'kind') return false;
  const value = valueAt(root, path);
  switch (issue.code) {
    case 'too_big':
    case 'too_small':
      return issue.origin !== 'array' || (Array.isArray(value) && value.length > exactArrayMax);
    case 'invalid_format':
    case 'not_multiple_of':
    case 'custom':
      return true;
    case 'invalid_type':
      return issue.expected === 'int' && shapeOf(value) === 'd';
    case 'invalid_value':
      return issue.values.some((allowed) => shapeOf(allowed) === shapeOf(value));
    case 'invalid_union':
      if (issue.errors.length === 0)
        return issue.inclusive === false || (issue.options ?? []).some((option) => shapeOf(option) === shapeOf(value));
      return issue.errors.some(
        (option) => option.length > 0 && option.every((inner) => isValueIssue(inner, path, root)),
      );
    case 'unrecognized_keys':
    case 'invalid_key':
    case 'invalid_element':
      return false;
  }
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const step of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[step];
  }
  return value;
}

function deepFreeze(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Arrays up to this length are shaped element by element (a tuple's length is in its shape); longer ones as a set. */
const exactArrayMax = 8;

/**
 * The structure of a value, as a string two values share only when they have the same keys in the same order at every
 * depth and the same type at every leaf: objects by their keys (length-prefixed, so no key can forge another's
 * structure); an array of up to exactArrayMax elements by each element's shape, with its length, and a longer one by
 * the set of its elements' shapes (so a pair with a third element is another shape, while a long list's length is a
 * value); anything that is not plain data — a class instance, an object without Object's prototype, a `toJSON`
 * (JSON.stringify would write what it returns), a non-finite number, a function, a symbol — as `!`, which the checker
 * never remembers.
 */
export function shapeOf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return 's';
    case 'number':
      return Number.isFinite(value) ? 'd' : '!';
    case 'boolean':
      return 'b';
    case 'undefined':
      return 'u';
    case 'object':
      break;
    default:
      return '!';
  }
  if (value === null) return 'n';
  if ('toJSON' in value) return '!';
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return '!';
    const items = value as unknown[];
    if (items.length <= exactArrayMax) {
      let out = `[${items.length}:`;
      for (const item of items) out += `${shapeOf(item)},`;
      return `${out}]`;
    }
    return `[*${[...new Set(items.map(shapeOf))].sort().join(',')}]`;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return '!';
  let out = '{';
  for (const key of Object.keys(value))
    out += `${key.length}:${key}=${shapeOf((value as Record<string, unknown>)[key])},`;
  return `${out}}`;
}

/**
 * A person's attested rejection is ATTESTED_REJECTED (101f91b). REMOTE_REJECTED means the remote returned a complete,
 * authoritative refusal, which an attestation never is: no new event may record it as one, neither an
 * OPERATOR_ATTESTED nor any classification whose source is operator_attested (what the fold and migration 016 recode).
 * Old events that carry it are already sealed in their journals and are never validated again: they verify and fold.
 * Replaying such a journal (one a broker before 101f91b wrote with an attested REMOTE_REJECTED) through
 * broker/testing/replay-journal.ts is therefore refused at that event, since a replay appends each event anew through
 * this validation; that tool is test-only, so no journal of a user's is affected.
 */
function refuseAttestedAsRemote(event: NewEvent): void {
  const c = event.classification;
  if (c?.code !== 'REMOTE_REJECTED') return;
  if (event.kind !== 'OPERATOR_ATTESTED' && c.source !== 'operator_attested') return;
  throw new CodedError(
    'INVALID_ARGUMENT',
    'invalid event: classification.code: an attested rejection is ATTESTED_REJECTED, never REMOTE_REJECTED (a refusal the remote returned)',
    { field: 'classification.code' },
  );
}

/**
 * A CANCELLED says who closed the ticket twice: its actor, and its classification's code, the only one the
 * counters keep (`postern metrics` tells a caller's withdrawal from a person's cancel by it; core/metrics.ts).
 * The two must agree: the agent's own stop carries a caller code, anyone else's never does; and a code that says the
 * caller's process is gone (SESSION_ENDED) is the broker's alone, never a person's or the agent's.
 */
function requireCancellerCode(event: NewEvent): void {
  if (event.kind !== 'CANCELLED') return;
  const byAgent = event.payload.actor.kind === 'agent';
  const code = event.classification?.code ?? null;
  if (code !== null && callerGoneCodes.has(code) && event.payload.actor.kind !== 'broker')
    throw new CodedError(
      'INVALID_ARGUMENT',
      `invalid event: classification.code: ${code} is the broker's when the caller's process is gone, never a ${event.payload.actor.kind}'s`,
      { field: 'classification.code' },
    );
  if (byAgent === (code !== null && callerStopCodes.has(code))) return;
  throw new CodedError(
    'INVALID_ARGUMENT',
    `invalid event: classification.code: a CANCELLED by ${byAgent ? 'the agent needs its caller code' : 'anyone but the agent never carries a caller code'}`,
    { field: 'classification.code' },
  );
}

function requireSubjectPrefix(event: Pick<NewEvent, 'kind' | 'action_id'>): void {
  const needed = subjectPrefixOf(event.kind);
  if (event.action_id.startsWith(needed)) return;
  const article = needed === 'act_' ? 'an' : 'a';
  throw new CodedError(
    'INVALID_ARGUMENT',
    `invalid event: action_id: ${event.kind} needs ${article} ${needed} subject id`,
    { field: 'action_id' },
  );
}

function subjectPrefixOf(kind: NewEvent['kind']): 'ses_' | 'cfg_' | 'crq_' | 'act_' {
  if (isSessionEventKind(kind)) return 'ses_';
  if (isConfigEventKind(kind)) return 'cfg_';
  return isCredentialRequestEventKind(kind) ? 'crq_' : 'act_';
}

function invalid(error: z.ZodError, prefix: readonly PropertyKey[]): CodedError {
  const issue = error.issues[0];
  const path = [...prefix, ...(issue?.path ?? [])].map(String);
  const field = path.length > 0 ? path.join('.') : 'event';
  return new CodedError('INVALID_ARGUMENT', `invalid event: ${field}: ${issue?.message ?? 'invalid'}`, { field });
}
