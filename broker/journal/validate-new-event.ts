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
  return { ...envelope.data, payload: payload.data } as NewEvent;
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
