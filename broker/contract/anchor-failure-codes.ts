// Schema-free, so `postern integrity` registers its commands without loading zod (issue 18: cold start).

/** Why a start quarantined the broker: one stable code per failure, shown on the banner and by `integrity.anchor`. */
export const anchorFailureCodes = [
  'ANCHOR_ROLLBACK',
  'ANCHOR_FORGED',
  'ANCHOR_TAIL_MISSING',
  'ANCHOR_MISSING',
  'ANCHOR_STATE_MISMATCH',
] as const;
export type AnchorFailureCode = (typeof anchorFailureCodes)[number];
