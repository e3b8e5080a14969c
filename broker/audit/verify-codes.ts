import type { ClosedSet } from '../contract/closed-set.js';
import { meaningsFrom, type CodesFrom } from '../contract/error-codes.js';

export type VerifyCode = CodesFrom<'audit_verify'>;

/**
 * Every stable code `postern audit verify` can fail with: the registry's `audit_verify` codes, with
 * their one meaning (broker/contract/error-codes.ts; docs/audit.md lists them and a test compares).
 * `seq` in a failure is the first append position the code is about, or null where no single
 * position can be named.
 */
export const verifyCodeMeanings = meaningsFrom('audit_verify');

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
