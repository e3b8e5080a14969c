#!/usr/bin/env node
// @ts-check
// `npm test`: lint → format check → typecheck → CLI bundle → unit/integration → renderer build → e2e, in that order,
// each streaming its own output. The CLI bundle comes before the unit step so the tests that spawn
// `postern` run what users run (bin/postern.mjs runs the fresh bundle; had this step failed, tsx).
// Every step runs even if an earlier one failed (one run shows every problem), except e2e, which
// needs the renderer that was just built. The last line is exactly
//   tests: N passed, M failed[, K skipped]
// where a failed step that is not a test run (lint, typecheck, build), or a test run that failed
// without a failing test (crash, a file that does not load), counts as one failure. Exit code 0
// only when nothing failed. Skipped tests are listed with the reason they gave (ctx.skip('why')), and
// failed ones after them with the start of their error.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { stepLines } from './test-summary.mjs';

const root = path.resolve(import.meta.dirname, '..');
const require = createRequire(import.meta.url);
// Per step: the unit step takes ~6 min on a fast 2-vCPU VM and over 15 on a slow one (2026-12-02, AMD EPYC 2.1 GHz); CI allows 90 in all.
const stepTimeoutMs = 40 * 60 * 1000;
const summaryDir = mkdtempSync(path.join(os.tmpdir(), 'postern-test-'));
const reporters = ['--reporter=default', `--reporter=${path.join(root, 'scripts', 'vitest-summary-reporter.mjs')}`];

/**
 * @typedef {{ name: string; bin?: [string, string]; script?: string; args: string[]; summary?: string; needs?: string; env?: Record<string, string> }} Step
 *   bin: a package's bin to run; script: one of ours (relative to the root) instead; env: set for this step only
 * @typedef {import('./test-summary.mjs').Summary} Summary
 */

/** @type {Step[]} */
const steps = [
  { name: 'lint', bin: ['eslint', 'eslint'], args: ['.', '--max-warnings', '0'] },
  // The formatter's check: a file not as `npm run format` leaves it fails here (config: .prettierrc.json).
  { name: 'format', bin: ['prettier', 'prettier'], args: ['--check', '.', '--log-level', 'warn'] },
  { name: 'typecheck', bin: ['typescript', 'tsc'], args: ['-b'] },
  { name: 'cli build', script: 'scripts/build-cli.mjs', args: [] },
  { name: 'unit', bin: ['vitest', 'vitest'], args: ['run', ...reporters], summary: path.join(summaryDir, 'unit.json') },
  // The journal's tests again with every batch committed on the writer thread (broker/testing/temp-journal.ts
  // writerThreadPass; the crash driver too), as the daemon commits a busy turn's batch.
  {
    name: 'writer thread',
    bin: ['vitest', 'vitest'],
    args: ['run', 'broker/journal', ...reporters],
    env: { POSTERN_TEST_WRITER_THREAD: '1' },
    summary: path.join(summaryDir, 'writer-thread.json'),
  },
  {
    name: 'renderer build',
    bin: ['vite', 'vite'],
    args: ['build', '--config', 'renderer/vite.config.ts', '--logLevel', 'warn'],
  },
  {
    name: 'e2e',
    bin: ['vitest', 'vitest'],
    args: ['run', '--config', 'e2e/vitest.config.ts', ...reporters],
    summary: path.join(summaryDir, 'e2e.json'),
    needs: 'renderer build',
  },
];

/** The JS file behind a package's bin, run with this node: no shell, no .cmd shims. */
function binPath(/** @type {[string, string]} */ [pkg, name]) {
  const manifestPath = require.resolve(`${pkg}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const bin = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name];
  return path.join(path.dirname(manifestPath), bin);
}

function stepFile(/** @type {Step} */ step) {
  if (step.script !== undefined) return path.join(root, step.script);
  if (step.bin !== undefined) return binPath(step.bin);
  throw new Error(`step ${step.name} names neither a bin nor a script`);
}

/** @returns {Promise<number>} the exit code (or 1 on a timeout or spawn error) */
function run(/** @type {Step} */ step) {
  return new Promise((resolve) => {
    const env = { ...process.env, ...step.env };
    if (step.summary !== undefined) env['POSTERN_VITEST_SUMMARY'] = step.summary;
    const child = spawn(process.execPath, [stepFile(step), ...step.args], { cwd: root, env, stdio: 'inherit' });
    const timer = setTimeout(() => {
      process.stderr.write(`\n${step.name}: no result after ${stepTimeoutMs / 60000} minutes; stopping it.\n`);
      child.kill('SIGKILL');
    }, stepTimeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      process.stderr.write(`${step.name}: could not start: ${error.message}\n`);
      resolve(1);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}

/** @returns {Summary | undefined} */
function readSummary(/** @type {string} */ file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

const totals = { passed: 0, failed: 0, skipped: 0 };
/** @type {string[]} */
const failedSteps = [];
/** @type {string[]} */
const skippedLines = [];
/** @type {string[]} */
const failedLines = [];
/** @type {string[]} */
const table = [];

for (const step of steps) {
  const started = Date.now();
  if (step.needs !== undefined && failedSteps.includes(step.needs)) {
    process.stdout.write(`\n=== ${step.name}: not run, because ${step.needs} failed\n`);
    failedSteps.push(step.name);
    totals.failed += 1;
    table.push(`${step.name.padEnd(16)} NOT RUN (${step.needs} failed)`);
    continue;
  }
  process.stdout.write(`\n=== ${step.name}\n`);
  const code = await run(step);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  let detail = '';
  let failedHere = 0;
  if (step.summary !== undefined) {
    const summary = readSummary(step.summary);
    if (summary !== undefined) {
      const lines = stepLines(step.name, summary);
      totals.passed += lines.passed;
      totals.skipped += lines.skipped;
      failedHere = lines.failed;
      skippedLines.push(...lines.skippedLines);
      failedLines.push(...lines.failedLines);
      detail = lines.detail;
    }
  }
  // A failing step with no failing test to show for it (lint, typecheck, a build, a crash) is one failure.
  if (code !== 0 && failedHere === 0) failedHere = 1;
  if (code !== 0 || failedHere > 0) failedSteps.push(step.name);
  totals.failed += failedHere;
  table.push(
    `${step.name.padEnd(16)} ${code === 0 && failedHere === 0 ? 'ok    ' : 'FAILED'} ${seconds.padStart(6)} s  ${detail}`,
  );
}

rmSync(summaryDir, { recursive: true, force: true });
process.stdout.write('\n=== summary\n');
for (const line of table) process.stdout.write(`${line}\n`);
for (const line of skippedLines) process.stdout.write(`${line}\n`);
// Last before the totals, so that a log cut to its tail still names what failed and how.
for (const line of failedLines) process.stdout.write(`${line}\n`);
if (failedSteps.length > 0) process.stdout.write(`failed steps: ${failedSteps.join(', ')}\n`);
const skippedPart = totals.skipped > 0 ? `, ${totals.skipped} skipped` : '';
process.stdout.write(`tests: ${totals.passed} passed, ${totals.failed} failed${skippedPart}\n`);
process.exitCode = totals.failed > 0 ? 1 : 0;
