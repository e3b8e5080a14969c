import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import type { PidNamespaceReport } from '../testing/pid-namespace-renice-driver.js';
import { createTempDir } from '../testing/temp-dir.js';
import { openTempJournal } from '../testing/temp-journal.js';
import { backgroundNiceness } from './verify-pool.js';
import { verifyWorkerSource } from './verify-worker-source.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

/** A real PID namespace: Linux, root (unshare and the namespace's ns_last_pid), and /proc/thread-self to read. */
function unavailable(): string | undefined {
  if (process.platform !== 'linux') return 'PID namespaces are Linux-only';
  if (!existsSync('/proc/thread-self')) return 'no /proc/thread-self: thread priorities are not set here';
  if (process.getuid?.() !== 0) return "needs root: unshare --pid and writing the namespace's ns_last_pid";
  const probe = spawnSync('unshare', ['--pid', '--fork', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) return `unshare --pid --fork does not run here: ${probe.error?.message ?? probe.stderr}`;
  return undefined;
}

async function journalOf(count: number): Promise<string> {
  const t = await openTempJournal({ checkpointEveryEvents: 1_000 });
  cleanup.push(() => t.dispose());
  const events = actionPaths.httpApproved('act_pidns_0001').slice(0, count) as NewEvent[];
  for (const event of events) await t.journal.append(event);
  await t.journal.close();
  return t.path;
}

/** Runs the driver in a new PID namespace, with (`ownProc`) or without a /proc mounted for it. */
function inPidNamespace(journal: string, ownProc: boolean): Promise<PidNamespaceReport> {
  const driver = fileURLToPath(new URL('../testing/pid-namespace-renice-driver.ts', import.meta.url));
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const scratch = createTempDir('postern-pidns-');
  cleanup.push(() => scratch.remove());
  writeFileSync(join(scratch.path, 'verify-worker.cjs'), verifyWorkerSource);
  const args = ['--pid', '--fork', ...(ownProc ? ['--mount-proc'] : [])];
  return new Promise((resolve, reject) => {
    const child = spawn(
      'unshare',
      [...args, process.execPath, '--import', 'tsx', driver, journal, scratch.path, String(backgroundNiceness)],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(stdout) as PidNamespaceReport);
      else reject(new Error(`PID namespace driver exited ${code}: ${stderr}`));
    });
  });
}

describe('a background verify inside a PID namespace', () => {
  it('without its own /proc: the worker takes the lower priority by its id here, and the process its /proc id names here keeps its own', async (ctx) => {
    const why = unavailable();
    if (why !== undefined) {
      console.log(`skipped: ${why}`);
      ctx.skip(why);
    }
    const report = await inPidNamespace(await journalOf(3), false);
    // /proc is the parent namespace's: the worker's thread id there is not its id here, where this process is 1.
    expect(report.pid).toBe(1);
    const [tgid] = report.threadSelf.split('/').map(Number);
    expect(tgid).not.toBe(report.pid);
    // The case performed: a process of this namespace has the number /proc/thread-self gave the worker's thread.
    expect(report.victim).toEqual({ pid: expect.any(Number) as number, wanted: expect.any(Number) as number });
    if (!('pid' in report.victim)) return;
    expect(report.victim.pid).toBe(report.victim.wanted);
    expect(report.rows).toBe(3);
    if (report.baseNice >= 19) {
      console.log(`skipped: the driver already runs at nice ${report.baseNice}: no lower priority to take`);
      ctx.skip('no lower priority to take');
    }
    expect(report.victimNice).toBe(report.baseNice);
    expect(report.workerNice).toBe(Math.min(19, report.baseNice + backgroundNiceness));
  });

  it('with its own /proc: the worker takes the lower priority, and nothing else does', async (ctx) => {
    const why = unavailable();
    if (why !== undefined) {
      console.log(`skipped: ${why}`);
      ctx.skip(why);
    }
    const report = await inPidNamespace(await journalOf(3), true);
    expect(report.pid).toBe(1);
    expect(report.threadSelf.split('/').map(Number)[0]).toBe(1);
    expect(report.rows).toBe(3);
    if (report.baseNice >= 19) {
      console.log(`skipped: the driver already runs at nice ${report.baseNice}: no lower priority to take`);
      ctx.skip('no lower priority to take');
    }
    expect(report.workerNice).toBe(Math.min(19, report.baseNice + backgroundNiceness));
    // Here the thread's id is already taken (by the thread): the sleep got another number and keeps its priority.
    if ('pid' in report.victim) expect(report.victimNice).toBe(report.baseNice);
  });
});
