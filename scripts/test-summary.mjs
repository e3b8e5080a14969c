// @ts-check
// What one vitest run's summary (written by scripts/vitest-summary-reporter.mjs) adds to `npm test`'s last lines
// (scripts/test.mjs): its counts, a line for each skipped test with its reason, and a line for each failure with the
// start of its error, named by the step that ran it.

/**
 * @typedef {{
 *   passed: number;
 *   failed: { name: string; error: string }[];
 *   skipped: { name: string; reason?: string | undefined }[];
 *   otherFailures: string[];
 * }} Summary
 *   one vitest run: failed tests with the start of their error, skipped ones with their reason (ctx.skip('why')),
 *   and failures that are not a test's (a file that does not load, an unhandled error)
 * @typedef {{ passed: number; failed: number; skipped: number; skippedLines: string[]; failedLines: string[]; detail: string }} StepLines
 */

/** @returns {StepLines} */
export function stepLines(/** @type {string} */ stepName, /** @type {Summary} */ summary) {
  return {
    passed: summary.passed,
    failed: summary.failed.length + summary.otherFailures.length,
    skipped: summary.skipped.length,
    skippedLines: summary.skipped.map(
      (skip) => `skipped: ${skip.name} — ${skip.reason ?? "no reason given (skip with ctx.skip('why'))"}`,
    ),
    failedLines: [
      ...summary.failed.map((failure) => `failed (${stepName}): ${failure.name} — ${failure.error}`),
      ...summary.otherFailures.map((failure) => `failed (${stepName}): ${failure}`),
    ],
    detail: `${summary.passed} passed, ${summary.failed.length} failed, ${summary.skipped.length} skipped`,
  };
}
