import type { ErrorCode } from './error-codes.js';

/**
 * The one error class thrown inside the broker for operating errors that carry a stable code.
 * `field` is the path the caller can fix (for example `headers.authorization`).
 */
export class CodedError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;

  constructor(code: ErrorCode, message: string, options: { field?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CodedError';
    this.code = code;
    this.field = options.field;
  }
}

export function isCodedError(value: unknown): value is CodedError {
  return value instanceof CodedError;
}
