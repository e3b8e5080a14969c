import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { sqliteNativeBinding } from '../ports/open-database.js';
import { verifyWorkerSource } from './verify-worker-source.js';

/** Worker threads one verify starts: one per core, and a few at most (the disk is shared too). */
export const verifyWorkersMax = 4;
/**
 * How much less CPU priority a background verify's threads take than the thread that started them (nice steps, to at
 * most 19). At +10 the kernel's scheduler weighs them about a tenth of the event loop, which then waits a scheduler
 * tick at most for a core (bench/audit.ts: `status` during a verify).
 */
export const backgroundNiceness = 10;
/** SQLite page cache per verify connection (KiB): a verify reads each page once, in order. */
export const verifyCacheKiB = 1_024;
/**
 * A small young generation: each row's three blobs are malloc'd Buffers, freed only when a scavenge finds them dead.
 * With V8's default semi-spaces and better-sqlite3's default 16 MB page cache per connection, a 1M-row verify left the
 * process 50-75 MB larger after its threads ended (malloc keeps what the threads freed); with these, ~15 MB
 * (bench/audit.ts), at no measurable cost in speed.
 */
const workerLimits = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 128 };

export interface VerifyWorkerBounds {
  readonly ciphertextBytesMax: number;
  readonly textCellCharsMax: number;
  readonly nonceBytes: number;
  readonly hashBytes: number;
}

export type VerifyJob =
  | { readonly kind: 'rows'; readonly lo: number; readonly hi: number; readonly sizes: readonly number[] }
  | { readonly kind: 'count'; readonly n: number }
  | {
      readonly kind: 'signatures';
      readonly signPublic: Uint8Array;
      readonly checkpoints: ReadonlyArray<{
        readonly size: number;
        readonly message: Uint8Array;
        readonly signature: Uint8Array;
      }>;
    };

export type VerifyJobResult =
  | { readonly bad: number }
  | { readonly roots: Uint8Array[]; readonly rootsAt: Array<[number, Uint8Array[]]> }
  | { readonly rows: number }
  | { readonly badSize?: number }
  | { readonly failed: string };

/**
 * Runs `jobs` on up to `threads` worker threads, each job handed to the next idle thread (a loaded
 * core finishes fewer); results come back in job order. `onRows` hears rows checked as they are.
 * The threads end when the last job is answered, or at the first worker error (the promise rejects).
 */
export function runVerifyJobs(
  dbPath: string,
  jobs: readonly VerifyJob[],
  options: {
    bounds: VerifyWorkerBounds;
    threads?: number;
    progressEveryRows: number;
    onRows?: (rows: number) => void;
    /** Each thread lowers its own CPU priority by `backgroundNiceness` (Linux; elsewhere it keeps the caller's). */
    background?: boolean;
  },
): Promise<VerifyJobResult[]> {
  const require = createRequire(import.meta.url);
  const workerData = {
    dbPath,
    bounds: options.bounds,
    progressEveryRows: options.progressEveryRows,
    cacheKiB: verifyCacheKiB,
    sqlitePath: require.resolve('better-sqlite3'),
    sodiumPath: require.resolve('libsodium-wrappers-sumo'),
    nativeBinding: sqliteNativeBinding(),
    niceness: options.background === true ? backgroundNiceness : 0,
  };
  const threads = Math.max(1, Math.min(options.threads ?? availableParallelism(), verifyWorkersMax, jobs.length));
  const results: VerifyJobResult[] = new Array<VerifyJobResult>(jobs.length);
  let next = 0;
  let answered = 0;
  return new Promise((resolve, reject) => {
    const workers: Worker[] = [];
    // Asked to end, each thread closes its connection itself (SQLite frees its page cache) and returns.
    const stopAll = (): void => {
      for (const w of workers) w.postMessage({ kind: 'end' });
    };
    const give = (worker: Worker): void => {
      if (next >= jobs.length) return;
      const id = next;
      next += 1;
      worker.postMessage({ ...jobs[id], id });
    };
    for (let i = 0; i < threads; i += 1) {
      const worker = new Worker(verifyWorkerSource, { eval: true, workerData, resourceLimits: workerLimits });
      workers.push(worker);
      worker.on('message', (m: { id?: number; result?: VerifyJobResult; failed?: string; progress?: number }) => {
        if (m.progress !== undefined) {
          options.onRows?.(m.progress);
          return;
        }
        if (m.id === undefined) return;
        results[m.id] = m.failed !== undefined ? { failed: m.failed } : (m.result as VerifyJobResult);
        answered += 1;
        if (answered === jobs.length) {
          stopAll();
          resolve(results);
        } else give(worker);
      });
      worker.on('error', (error) => {
        for (const w of workers) void w.terminate();
        reject(error);
      });
      // A thread that ended without an error event (killed, out of memory) must not leave the verify waiting forever.
      worker.on('exit', () => {
        if (answered < jobs.length) {
          for (const w of workers) void w.terminate();
          reject(new Error('a verify worker thread ended before its job was answered'));
        }
      });
      give(worker);
    }
  });
}
