// @ts-check
// A vitest reporter that writes what scripts/test.mjs needs to count: passed, failed and skipped
// tests, each skipped test with its reason (the note from `ctx.skip('why')`), and failures that are
// not tests (a file that fails to load, an unhandled error). Output file: $POSTERN_VITEST_SUMMARY.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

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
    let failed = 0;
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
        else if (result.state === 'failed') failed += 1;
        else if (result.state === 'skipped')
          skipped.push({ name, reason: test.options.mode === 'todo' ? 'todo' : result.note });
      }
    }
    for (const error of unhandledErrors)
      otherFailures.push(
        `unhandled: ${error instanceof Error ? error.message : String(/** @type {{message?: unknown}} */ (error)?.message ?? error)}`,
      );
    writeFileSync(outputFile, `${JSON.stringify({ passed, failed, skipped, otherFailures }, null, 2)}\n`);
  }
}
