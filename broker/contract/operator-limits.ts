/**
 * The operator API's input bounds that the CLI states in its help and checks before it asks, with no schema loaded:
 * the CLI registers its commands without zod (issue 18: cold start), and the schemas (operator-api.ts,
 * action-list-api.ts) are built from these, so the two cannot drift.
 */

/**
 * The most rows one `activity.list` page answers (default 100); a larger limit is answered with this
 * many and `next_seq`. The CLI refuses more, so `--newest --limit N` never shows N events it cannot.
 */
export const activityPageMax = 500;
export const activityPageDefault = 100;
/** The most rows one `actions.list` page answers. */
export const actionListLimitMax = 500;
/** A reject's or an abandonment's reason, and a cancellation's when given: 1 to this many characters, trimmed. */
export const decisionReasonCharsMax = 2000;
/** A person's attestation basis: 1 to this many characters, trimmed. */
export const attestBasisCharsMax = 4000;

/** Input fields that hold secrets, by method: the logger redacts these paths, wherever they appear. */
export const secretInputFields = ['passphrase', 'secret'] as const;
