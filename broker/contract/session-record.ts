import type { ClosedSet } from './closed-set.js';

// Schema-free (no zod): the CLI writes these words without loading a schema (issue 18: cold start).

/**
 * How far the journal has checked the session record it shows (THREAT-MODEL 3). A session an earlier run wrote is read
 * from its `sessions` row when the journal opens, and any process of the user could have edited that row while no
 * broker ran; it is the journal's own record only once its sealed events have been folded over it.
 * - `confirmed`: the journal's own record (written in this run, or folded from its sealed events); its approval, if
 *   any, is acted on.
 * - `unconfirmed`: the row as read at open, not checked yet (its events open only while the vault is unlocked; an
 *   ended session is checked by a later list, or by the daemon behind the loop after an unlock, a bounded number at a
 *   time). Nothing it says is acted on until then, and an approval it names is no person's decision the journal can
 *   vouch for.
 *   A session written over while unconfirmed (a reconnection while locked) stays unconfirmed until checked.
 * - `unverifiable`: the row as read at open; its events do not fold (they do not authenticate, a run that never had
 *   a key sealed them so no unlock opens them, or there are too many of them): nothing it says is acted on in this
 *   run.
 * - `approval_withheld`: confirmed from its events, but its row at open named another process, which may have bound a
 *   connection to it: its approval is not acted on in this run (its calls get cards).
 */
export const SessionRecordCheck = {
  confirmed: 'confirmed',
  unconfirmed: 'unconfirmed',
  unverifiable: 'unverifiable',
  approval_withheld: 'approval_withheld',
} as const satisfies ClosedSet<string>;
export type SessionRecordCheck = keyof typeof SessionRecordCheck;

/**
 * A few words beside a session's status for a record that is not the journal's own (SessionRecordCheck), as the
 * console, the cards and the CLI write them; null for a confirmed one, which needs none.
 */
export const sessionRecordWords: Readonly<Record<SessionRecordCheck, string | null>> = {
  confirmed: null,
  unconfirmed: "unconfirmed: the journal file's word, not yet checked against its sealed events",
  unverifiable: 'unconfirmed: its sealed events do not confirm the journal file',
  approval_withheld: 'its approval is not used in this run',
};
