import type { z } from 'zod';
import {
  CodedError,
  storedActionStateSchema,
  storedSessionStateSchema,
  type ActionState,
  type SessionState,
} from '../contract/index.js';

/**
 * The one place an older stored row meets the current shape. The `state` column holds the JSON of a projected state as
 * the broker that wrote it knew it; rows are never rewritten by a migration (the events are the record, the state is a
 * cache of their fold), so a row can predate any field added since. Each default below is what the code read an absent
 * field as before it was required (#17): no retries, never abandoned, no lease, the route's own approval, no bound key,
 * no reconnections, nothing withheld from the allowlist. Anything else that does not parse is damage or a bug, and stops the read with a coded error rather
 * than a guess.
 */
export function upgradeActionState(json: string): ActionState {
  const stored = parseStored(storedActionStateSchema, json, 'actions.state');
  const lease = stored.lease ?? null;
  return {
    ...stored,
    abandoned: stored.abandoned ?? false,
    retry_budget: stored.retry_budget ?? 0,
    retry_generation: stored.retry_generation ?? 0,
    lease: lease === null ? null : { ...lease, decision: lease.decision ?? null },
    approval_rule: stored.approval_rule ?? null,
    key_expires_at_ms: stored.key_expires_at_ms ?? null,
  };
}

/** A `sessions.state` row in the current shape (see upgradeActionState). */
export function upgradeSessionState(json: string): SessionState {
  const stored = parseStored(storedSessionStateSchema, json, 'sessions.state');
  return {
    ...stored,
    reconnects: stored.reconnects ?? 0,
    allowlist_withheld: stored.allowlist_withheld ?? null,
    // Before approved_at_ms, the grant ran from the last event (as the grant check then read it).
    approved_at_ms: stored.approved_at_ms ?? (stored.status === 'approved' ? stored.updated_at_ms : null),
  };
}

/** The message names the field and zod's complaint, never the stored value. */
function parseStored<S extends z.ZodType>(schema: S, json: string, column: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (cause) {
    throw new CodedError('INTERNAL', `a stored ${column} row is not JSON`, { field: column, cause });
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = issue === undefined || issue.path.length === 0 ? '' : `.${issue.path.join('.')}`;
  throw new CodedError(
    'INTERNAL',
    `a stored ${column} row does not match any shape Postern wrote (${column}${path}: ${issue?.message})`,
    {
      field: `${column}${path}`,
    },
  );
}
