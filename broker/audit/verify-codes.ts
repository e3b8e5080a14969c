import type { ClosedSet } from '../contract/index.js';

/**
 * Every stable code `postern audit verify` can fail with, each with a one-line meaning (listed in
 * docs/audit.md; a test compares them). `seq` in a failure is the first append position the code
 * is about, or null where no single position can be named.
 */
export const verifyCodeMeanings = {
  DB_UNREADABLE: 'The file is not a readable SQLite database (or is not a Postern journal).',
  SCHEMA_UNSUPPORTED: 'The journal schema is older than the audit log (4) or newer than this verifier knows.',
  CHECKPOINT_FILE_INVALID: 'The --checkpoint file is missing, too large, or not a Postern checkpoint.',
  KEY_MISMATCH: "The journal's checkpoint public key differs from the key in the trusted checkpoint file.",
  ROW_MALFORMED: 'A row has a cell of the wrong type or size (hostile or damaged input); seq is that row.',
  ROW_MISSING: 'An append position is absent: a row was deleted (or the log starts late); seq is the first gap.',
  ROW_MODIFIED: "A row's bytes no longer hash to its leaf: header, nonce, ciphertext or leaf changed, or rows swapped.",
  CHAIN_BROKEN: 'The stored tree head does not match the rows (rows appended or rewritten outside the journal).',
  SIGNATURE_INVALID: 'A checkpoint signature does not verify under the checkpoint public key; seq is its size.',
  FORKED: 'The rows up to a signed checkpoint hash to a different root: history was rewritten after signing.',
  TRUNCATED: 'The log ends before a position that was recorded (tree head or checkpoint); seq is the first lost one.',
  ROLLED_BACK: 'The log is consistent but older than the trusted checkpoint: the file was replaced by an earlier copy.',
} as const;

export type VerifyCode = keyof typeof verifyCodeMeanings;

export const VerifyCode = Object.fromEntries(Object.keys(verifyCodeMeanings).map((code) => [code, code])) as {
  readonly [K in VerifyCode]: K;
} satisfies ClosedSet<VerifyCode>;

/** A failed step: stable code, the first bad append position (or null), and a message for people. */
export class VerifyFailure extends Error {
  constructor(
    readonly code: VerifyCode,
    readonly seq: number | null,
    message: string,
  ) {
    super(message);
    this.name = 'VerifyFailure';
  }
}
