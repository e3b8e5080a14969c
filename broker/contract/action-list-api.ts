import { z } from 'zod';
import { ActionStage, Decision } from './action-record.js';
import { Channel, Effect, Outcome } from './outcome.js';
import { actionListLimitMax } from './operator-limits.js';

/**
 * `actions.list`: one row per action, newest first — what an operator browses (issue #16), where
 * `activity.list` is the raw event log. Rows are read from the journal's projection, never from
 * decrypted payloads; nothing in a row is a secret (targets, paths and commands are what the agent
 * asked for, shown as everywhere else, bounded).
 */
export const actionListRowSchema = z.object({
  action_id: z.string(),
  ticket: z.number().int().nullable(),
  /** When the broker accepted the call (ACTION_ACCEPTED). */
  accepted_at_ms: z.number().int(),
  /** The agent session and the process behind it; null for the broker's own lookups. */
  session_id: z.string().nullable(),
  agent: z.object({ name: z.string().max(200).nullable(), pid: z.number().int().nullable() }).nullable(),
  channel: z.enum(Channel),
  /** The route or SSH host name. */
  target: z.string().max(200),
  /** HTTP: the method; null for SSH. */
  method: z.string().max(16).nullable(),
  /** HTTP: the path (no query); SSH: the command line. Bounded to 400 characters with "…". */
  request: z.string().max(401),
  lane: z.string().max(200).nullable(),
  stage: z.enum(ActionStage),
  decision: z.enum(Decision).nullable(),
  /**
   * Who decided, worded as everywhere (`person:alice (web, operator session)`, `policy:…`); for a call admitted under
   * `approval: none`, `policy (approval: none)` or `policy (approval: none; <approval_rule>)` (no decision event:
   * `decision` stays null). Null before a decision.
   */
  decided_by: z.string().max(400).nullable(),
  /**
   * The recorded outcome; null while open (settled_at_ms null): a dispatched action still running is in flight, as
   * `status` counts it, never an unknown outcome (the journal's projection holds unknown provisionally from its
   * dispatch on; the row does not pass it on). What the `outcome` filter matches.
   */
  outcome: z.enum(Outcome).nullable(),
  code: z.string().max(80).nullable(),
  /** The recorded effect; null while open, as `outcome`. */
  effect: z.enum(Effect).nullable(),
  /** The timeline of the action: each null until it happened. */
  decided_at_ms: z.number().int().nullable(),
  dispatched_at_ms: z.number().int().nullable(),
  /** When the outcome was recorded (settled or closed); null while open. */
  settled_at_ms: z.number().int().nullable(),
  /** accepted → settled; null while open. */
  duration_ms: z.number().int().nullable(),
  first_seq: z.number().int().positive(),
  last_seq: z.number().int().positive(),
});
export type ActionListRow = z.infer<typeof actionListRowSchema>;

/**
 * A filter's free-text name (a lane, a target): not blank, and compared as given — a configured name may hold
 * surrounding spaces, so it is never trimmed.
 */
export function notBlank(max: number) {
  return z
    .string()
    .max(max)
    .refine((s) => s.trim() !== '', 'must not be blank');
}

export const actionListSchemas = {
  input: z.strictObject({
    /** Keyset paging: rows whose first_seq is below this (the previous page's `next_before`). */
    before_seq: z.number().int().positive().optional(),
    limit: z.number().int().positive().max(actionListLimitMax).optional(),
    session_id: z.string().trim().min(1).max(80).optional(),
    lane: notBlank(200).optional(),
    target: notBlank(200).optional(),
    /** Only actions settled with this outcome: a dispatched one still running (its row says unknown) is `open`. */
    outcome: z.enum(Outcome).optional(),
    code: z.string().max(80).optional(),
    /** Only actions not yet settled or closed, and recorded unknowns their lane still waits on. */
    open: z.boolean().optional(),
    /**
     * Case-insensitive substring of target, method, request, lane, action id, ticket, code, or who decided as the
     * list words it (decisionText: `approved by …`, `allowed by policy (approval: none…)`).
     */
    text: z.string().trim().min(1).max(200).optional(),
  }),
  output: z.object({
    actions: z.array(actionListRowSchema),
    /** The next older page's `before_seq`; null when no older action matches. */
    next_before: z.number().int().nullable(),
    /**
     * Set when a search (text, or more than one filter) stopped at its bound of rows examined per page
     * before filling the page: every action down to this journal position was searched, none older.
     * The page may hold fewer rows than asked, or none; `next_before` is this, to search on.
     */
    searched_before_seq: z.number().int().positive().nullable(),
    /**
     * The journal's newest position when the page was read (after that read committed what appends had queued, so it
     * is at or above every row's `last_seq`): a page without `before_seq` examined every action up to it. A reader that keeps rows from earlier reads tells by it whether a new first page meets them (no stretch
     * between them left unsearched).
     */
    as_of_seq: z.number().int().nonnegative(),
  }),
};

/**
 * What an action waited for in its lane, for the action detail ("#5 waited 41 s for #4"): each earlier ticket of the
 * lane that was still unresolved while this one was approved and not yet dispatched, with how long this one waited on
 * it (from this action's decision, or its acceptance, to that ticket's resolution or this one's dispatch).
 */
export const actionWaitSchema = z.object({
  ticket: z.number().int().positive(),
  action_id: z.string(),
  waited_ms: z.number().int().nonnegative(),
  /** Still waiting on it now. */
  ongoing: z.boolean(),
});
export type ActionWait = z.infer<typeof actionWaitSchema>;
