// @ts-check
// A vitest reporter that writes what scripts/test.mjs needs to count: passed, failed and skipped
// tests, each skipped test with its reason (the note from `ctx.skip('why')`), each failed test with
// the start of its error (so the run's last lines name it: CI keeps only a run's tail), and failures
// that are not tests (a file that fails to load, an unhandled error). Output file: $POSTERN_VITEST_SUMMARY.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

/** The start of an error's message, on one line: enough to tell which assertion failed. */
function errorHead(/** @type {{ message?: unknown } | undefined} */ error) {
  const message = typeof error?.message === 'string' ? error.message : String(error?.message ?? error);
  const oneLine = message.split('\n').slice(0, 4).join(' ').replace(/\s+/g, ' ').trim();
  return oneLine.length > 400 ? `${oneLine.slice(0, 400)}…` : oneLine;
}

/** @typedef {import('vitest/node').TestModule} TestModule */
/** @typedef {import('vitest/node').Reporter} Reporter */

/** @implements {Reporter} */
export default class SummaryReporter {
  /**
   * @param {ReadonlyArray<TestModule>} testModules
   * @param {ReadonlyArray<unknown>} unhandledErrors
   */
  onTestRunEnd(testModules, unhandledErrors) {
    const outputFile = process.env['POSTERN_VITEST_SUMMARY'];
    if (outputFile === undefined || outputFile === '') return;
    let passed = 0;
    /** @type {{ name: string; error: string }[]} */
    const failed = [];
    /** @type {{ name: string; reason: string | undefined }[]} */
    const skipped = [];
    /** @type {string[]} */
    const otherFailures = [];
    for (const testModule of testModules) {
      const file = path.relative(process.cwd(), testModule.moduleId);
      for (const error of testModule.errors()) otherFailures.push(`${file}: ${error.message}`);
      for (const test of testModule.children.allTests()) {
        const result = test.result();
        const name = `${file} > ${test.fullName}`;
        if (result.state === 'passed') passed += 1;
        else if (result.state === 'failed') failed.push({ name, error: errorHead(result.errors?.[0]) });
        else if (result.state === 'skipped')
          skipped.push({ name, reason: test.options.mode === 'todo' ? 'todo' : result.note });
      }
    }
    for (const error of unhandledErrors)
      otherFailures.push(
        `unhandled: ${error instanceof Error ? error.message : String(/** @type {{message?: unknown}} */ (error)?.message ?? error)}`,
      );
    /** @type {import('./test-summary.mjs').Summary} */
    const summary = { passed, failed, skipped, otherFailures };
    writeFileSync(outputFile, `${JSON.stringify(summary, null, 2)}\n`);
  }
}
