// The fixture run of tests/test-summary-reporter.test.ts: one file of tests that pass, fail and skip on
// purpose, run through scripts/vitest-summary-reporter.mjs. Not part of `npm test`'s own runs (its
// files end in .fixture.mjs, which no config of the project includes).
import { defineConfig } from 'vitest/config';

export default defineConfig({ test: { include: ['*.fixture.mjs'], pool: 'forks' } });
