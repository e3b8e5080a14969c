/**
 * Child process for the verify worker's PID-namespace test: `unshare --pid --fork [--mount-proc] node --import tsx
 * broker/testing/pid-namespace-renice-driver.ts <journal> <scratch dir> <niceness>`. It starts one verify worker thread
 * (the source the test wrote to `<scratch dir>/verify-worker.cjs`) as a background verify does (verify-pool.ts's
 * workerData, with `<niceness>`), has it answer one `count` job on the journal, and prints on one JSON line what came of
 * the worker's renice.
 *
 * The worker's first step is to load better-sqlite3 from `workerData.sqlitePath`; the driver names a module there that,
 * loaded on the worker's own thread, reads the thread's id from /proc/thread-self and starts a `sleep` at that very
 * number in this PID namespace (the namespace's ns_last_pid set one below it: it is root's, in its own namespace), then
 * loads the real better-sqlite3. Without a /proc of its own (no --mount-proc) the id /proc/thread-self names is the
 * parent namespace's, so the `sleep` is the process a setpriority of that id would reach here.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

export interface PidNamespaceReport {
  /** This process's pid in its namespace (1 under `unshare --fork`). */
  readonly pid: number;
  /** What /proc/thread-self said on the worker's thread: "<tgid>/task/<tid>". */
  readonly threadSelf: string;
  /** The `sleep` started at the worker's thread id, or why it could not be. */
  readonly victim: { readonly pid: number; readonly wanted: number } | { readonly error: string };
  readonly baseNice: number;
  /** The worker thread's nice value, read from /proc/self/task/<tid>/stat of this process. */
  readonly workerNice: number;
  /** The `sleep`'s nice value by its pid in this namespace (what setpriority would have changed). */
  readonly victimNice: number | null;
  readonly rows: number;
}

const [journal, scratch, niceness] = process.argv.slice(2);
if (journal === undefined || scratch === undefined || niceness === undefined)
  throw new Error('usage: <journal> <scratch dir> <niceness>');
/** The test writes the worker's source (verify-worker-source.ts) there: broker/testing does not import broker/audit. */
const verifyWorkerSource = readFileSync(join(scratch, 'verify-worker.cjs'), 'utf8');

const require = createRequire(import.meta.url);
const dir = mkdtempSync(join(scratch, 'hook-'));
const hook = join(dir, 'collide-sqlite.cjs');
writeFileSync(
  hook,
  `'use strict';
const { readlinkSync, writeFileSync } = require('node:fs');
const { spawn } = require('node:child_process');
const { parentPort, workerData } = require('node:worker_threads');
const threadSelf = readlinkSync('/proc/thread-self');
const wanted = Number(threadSelf.split('/')[2]);
let victim;
try {
  writeFileSync('/proc/sys/kernel/ns_last_pid', String(wanted - 1));
  victim = { pid: spawn('sleep', ['60'], { stdio: 'ignore' }).pid, wanted };
} catch (error) {
  victim = { error: String(error) };
}
parentPort.postMessage({ hook: { threadSelf, victim } });
module.exports = require(workerData.realSqlitePath);
`,
);

const worker = new Worker(verifyWorkerSource, {
  eval: true,
  workerData: {
    dbPath: journal,
    // verify-journal.ts's; the count job reads none of them.
    bounds: { ciphertextBytesMax: 1024 * 1024, textCellCharsMax: 4096, nonceBytes: 24, hashBytes: 32 },
    progressEveryRows: 1_000,
    cacheKiB: 1_024,
    sqlitePath: hook,
    realSqlitePath: require.resolve('better-sqlite3'),
    sodiumPath: require.resolve('libsodium-wrappers-sumo'),
    niceness: Number(niceness),
  },
});

const report = await new Promise<PidNamespaceReport>((resolve, reject) => {
  let seen: { threadSelf: string; victim: PidNamespaceReport['victim'] } | undefined;
  worker.on('error', reject);
  worker.on('message', (m: { hook?: typeof seen; id?: number; result?: { rows: number }; failed?: string }) => {
    if (m.hook !== undefined) {
      seen = m.hook;
      return;
    }
    if (m.id !== 1) return;
    if (seen === undefined || m.result === undefined) return reject(new Error(`worker answered ${JSON.stringify(m)}`));
    // The job's answer comes after the worker's renice: its priority is what the renice left.
    const tid = seen.threadSelf.split('/')[2];
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const workerNice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    const victimNice = 'pid' in seen.victim && seen.victim.pid !== undefined ? getPriority(seen.victim.pid) : null;
    resolve({
      pid: process.pid,
      threadSelf: seen.threadSelf,
      victim: seen.victim,
      baseNice: getPriority(),
      workerNice,
      victimNice,
      rows: m.result.rows,
    });
  });
  worker.postMessage({ kind: 'count', n: 1_000_000, id: 1 });
});
await worker.terminate();
if ('pid' in report.victim) process.kill(report.victim.pid, 'SIGKILL');
process.stdout.write(`${JSON.stringify(report)}\n`);
