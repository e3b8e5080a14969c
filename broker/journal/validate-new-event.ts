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
  const needed = subjectPrefixOf(kind);
  if (!envelope.data.action_id.startsWith(needed)) {
    const article = needed === 'act_' ? 'an' : 'a';
    throw new CodedError(
      'INVALID_ARGUMENT',
      `invalid event: action_id: ${kind} needs ${article} ${needed} subject id`,
      { field: 'action_id' },
    );
  }
  const payload = eventPayloadSchemas[kind].safeParse(envelope.data.payload);
  if (!payload.success) throw invalid(payload.error, ['payload']);
  const event = { ...envelope.data, payload: payload.data } as NewEvent;
  requireCancellerCode(event);
  refuseAttestedAsRemote(event);
  return event;
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
