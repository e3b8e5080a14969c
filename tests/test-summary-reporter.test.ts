// `npm test`'s last lines are all CI keeps of a run, so the summary reporter must carry, for each
// failed test, its name and the start of its error (scripts/vitest-summary-reporter.mjs, printed by
// scripts/test.mjs through scripts/test-summary.mjs). This runs a real vitest over a fixture file that passes, fails
// and skips once each, and reads its summary as `npm test` does.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { stepLines, type Summary } from '../scripts/test-summary.mjs';

const root = path.resolve(import.meta.dirname, '..');
const fixtureRoot = path.join(root, 'tests', 'support', 'summary-reporter-fixture');
const vitestBin = path.join(path.dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-summary-reporter-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the vitest summary reporter', () => {
  it('names each failed test with the start of its error, each skipped one with its reason', async () => {
    const summaryFile = path.join(scratch, 'summary.json');
    const reporter = path.join(root, 'scripts', 'vitest-summary-reporter.mjs');
    const run = promisify(execFile)(
      process.execPath,
      [vitestBin, 'run', '--root', fixtureRoot, `--reporter=${reporter}`],
      {
        cwd: fixtureRoot,
        env: { ...process.env, POSTERN_VITEST_SUMMARY: summaryFile, CI: 'true' },
      },
    );
    // The fixture fails on purpose, so vitest exits 1.
    await expect(run).rejects.toMatchObject({ code: 1 });
    const summary = JSON.parse(readFileSync(summaryFile, 'utf8')) as Summary;
    expect(summary.passed).toBe(1);
    expect(summary.otherFailures).toEqual([]);
    expect(summary.skipped).toEqual([
      { name: 'outcomes.fixture.mjs > outcomes > skips with a reason', reason: 'the fixture has no sshd' },
    ]);
    expect(summary.failed).toHaveLength(1);
    const [failed] = summary.failed;
    expect(failed?.name).toBe('outcomes.fixture.mjs > outcomes > fails on purpose');
    // The assertion's own words, on one line: the message and the values it compared.
    expect(failed?.error).toContain('the lane head');
    expect(failed?.error).toContain('expected { seq: 41 } to deeply equal { seq: 42 }');
    expect(failed?.error).not.toContain('\n');

    // The lines npm test prints from it, before the totals: the step, the test's file and name, and the error's start.
    const lines = stepLines('unit', summary);
    expect(lines).toMatchObject({ passed: 1, failed: 1, skipped: 1, detail: '1 passed, 1 failed, 1 skipped' });
    expect(lines.skippedLines).toEqual([
      'skipped: outcomes.fixture.mjs > outcomes > skips with a reason — the fixture has no sshd',
    ]);
    expect(lines.failedLines).toHaveLength(1);
    expect(lines.failedLines[0]).toMatch(
      /^failed \(unit\): outcomes\.fixture\.mjs > outcomes > fails on purpose — .*the lane head.*expected \{ seq: 41 \} to deeply equal \{ seq: 42 \}/,
    );
  }, 60_000);

  it('counts a file that did not load and an unhandled error as failures, each on a line of its own', () => {
    const lines = stepLines('e2e', {
      passed: 3,
      failed: [],
      skipped: [{ name: 'a.test.ts > no reason' }],
      otherFailures: ['b.test.ts: Failed to load url ./missing.js', 'unhandled: socket hang up'],
    });
    expect(lines.failed).toBe(2);
    expect(lines.failedLines).toEqual([
      'failed (e2e): b.test.ts: Failed to load url ./missing.js',
      'failed (e2e): unhandled: socket hang up',
    ]);
    expect(lines.skippedLines).toEqual([
      "skipped: a.test.ts > no reason — no reason given (skip with ctx.skip('why'))",
    ]);
  });
});
