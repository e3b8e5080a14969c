import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import {
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
 * - `shapes`: an event whose kind and shape (shapeOf: its keys at every depth, the type of each value) the schemas
 *   accepted before, returning it unchanged, skips them; any other shape goes through them, and is remembered once they
 *   accept it unchanged. The checks that no schema states (the subject's prefix, a canceller's code, an attested
 *   rejection) run on every event. What it leaves to the tests: the values inside a known shape (a length, a pattern,
 *   an enum member), which the broker's own code produces and its types constrain.
 * - `both`: `shapes`, and every event through the schemas as well; an event `shapes` would have let through that the
 *   schemas refuse, or change, is the broker's bug and throws (`EventChecksDisagree`). The test suites run this way
 *   (vitest.config.ts sets POSTERN_EVENT_CHECKS), so every event the tests make is checked both ways.
 *
 * Either way an unnamed field never reaches the journal: a shape names every key, so a key the schemas never accepted
 * makes a new shape, and a new shape is checked in full.
 */
export type EventChecks = 'full' | 'shapes' | 'both';

/** The default: `shapes`, unless POSTERN_EVENT_CHECKS names another mode (the test suites' `both`). */
export function eventChecksFromEnv(env: NodeJS.ProcessEnv = process.env): EventChecks {
  const named = env['POSTERN_EVENT_CHECKS'];
  return named === 'full' || named === 'both' ? named : 'shapes';
}

/** How many shapes a checker remembers; past it, new shapes are checked in full every time (a bound, not a cache). */
export const eventShapesMax = 4096;

/** Thrown in `both` mode when the shape check would have accepted what the schemas refuse or rewrite. */
export class EventChecksDisagree extends Error {
  constructor(kind: unknown, detail: string) {
    super(`event checks disagree on a ${String(kind)} event of a known shape: ${detail}`);
  }
}

/** The journal's check of each new event, in one of the EventChecks modes. */
export class NewEventChecker {
  private readonly shapes = new Set<string>();

  constructor(
    readonly mode: EventChecks,
    private readonly shapesMax = eventShapesMax,
  ) {}

  check(input: unknown): NewEvent {
    const kind = (input as { kind?: unknown } | null | undefined)?.kind;
    if (this.mode === 'full' || typeof kind !== 'string') return validateNewEvent(input);
    // Each kind has its own payload schema: a shape is known per kind.
    const shape = `${kind}|${shapeOf(input)}`;
    const known = this.shapes.has(shape);
    if (known && this.mode === 'shapes') return checkBeyondSchemas(input as NewEvent);
    let event: NewEvent;
    try {
      event = validateNewEvent(input);
    } catch (error) {
      // A known shape the schemas refuse is a disagreement unless the checks beyond them refuse it too.
      if (known) {
        checkBeyondSchemas(input as NewEvent);
        throw new EventChecksDisagree(kind, errorText(error));
      }
      throw error;
    }
    // Only what the schemas return unchanged (their order of keys aside) may later skip them: a shape they strip or
    // rewrite is checked every time.
    const unchanged = isDeepStrictEqual(event, input);
    if (known && !unchanged) throw new EventChecksDisagree(event.kind, 'the schemas rewrite it');
    if (!known && unchanged && !shape.includes('!') && this.shapes.size < this.shapesMax) this.shapes.add(shape);
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

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The structure of a value, as a string two values share only when they have the same keys in the same order at every
 * depth and the same type at every leaf: objects by their keys (length-prefixed, so no key can forge another's
 * structure), arrays by their elements' shapes with runs of one shape written once, anything that is not plain data
 * (a class instance, an object without Object's prototype, a function, a symbol) as `!`, which no shape the schemas
 * accepted unchanged contains, so it is never remembered.
 */
export function shapeOf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return 's';
    case 'number':
      return 'd';
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
  if (Array.isArray(value)) {
    let out = '[';
    let last = '';
    for (const item of value as unknown[]) {
      const shape = shapeOf(item);
      if (shape !== last) out += `${shape},`;
      last = shape;
    }
    return `${out}]`;
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
