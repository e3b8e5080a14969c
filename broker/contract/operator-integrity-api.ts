import { z } from 'zod';
import { anchorFailureCodes } from './anchor-failure-codes.js';

/**
 * The operator API over the signed integrity anchor (docs/audit.md "Integrity anchor"). Merged into
 * `brokerApiSchemas`. The anchor is a small file outside the data directory, signed with the audit key, naming the
 * journal's head at the last checkpoint; a start that finds the journal behind it, a signature that fails, or a head
 * the journal no longer has quarantines the broker (every action tool refused with JOURNAL_QUARANTINED) until a
 * person re-adopts the journal as it is.
 */

/** ok: the anchor matched; first_use: no anchor yet and none was ever recorded; quarantined: `code` says why. */
export const integrityStates = ['ok', 'first_use', 'quarantined'] as const;
export type IntegrityState = (typeof integrityStates)[number];

const hex = z.string().regex(/^[0-9a-f]*$/);

export const integrityAnchorReportSchema = z.object({
  state: z.enum(integrityStates),
  code: z.enum(anchorFailureCodes).nullable(),
  /** One sentence: what was found (no secret: positions, counters, key ids). */
  detail: z.string(),
  /** Where the anchor of this data directory lives. */
  anchor_file: z.string(),
  /** What the anchor file said, when it could be read (its signature may still have failed). */
  found: z
    .object({
      counter: z.number().int(),
      head_seq: z.number().int(),
      head_hash: hex,
      key_id: hex,
      written_at_ms: z.number().int(),
    })
    .nullable(),
  /** The journal as the start found it, and the anchor counter it recorded last (null: none ever). */
  journal: z.object({
    events: z.number().int().nonnegative(),
    last_seq: z.number().int().nonnegative(),
    recorded_counter: z.number().int().nullable(),
    key_id: hex.nullable(),
  }),
  checked_at_ms: z.number().int(),
  /** The last re-adoption in this run (a person's decision), else null. */
  readopted: z.object({ by: z.string(), at_ms: z.number().int(), code: z.enum(anchorFailureCodes) }).nullable(),
});
export type IntegrityAnchorReport = z.infer<typeof integrityAnchorReportSchema>;

export const integrityApiSchemas = {
  'integrity.anchor': { input: z.strictObject({}), output: integrityAnchorReportSchema },
  /**
   * A person adopts the journal as it is now: a new anchor is signed over its head (the vault must be unlocked), the
   * decision is journaled (INTEGRITY_READOPTED) and agents are served again. `code` is the failure the person saw, so a
   * click on a stale banner adopts nothing else.
   */
  'integrity.readopt': {
    input: z.strictObject({ code: z.enum(anchorFailureCodes) }),
    output: integrityAnchorReportSchema,
  },
};
