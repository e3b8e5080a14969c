import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { CodedError } from '../contract/index.js';
import { sqliteNativeBinding } from '../ports/open-database.js';
import type { TreeHead } from './audit-writer.js';
import type { BesideResult } from './beside-rows.js';
import type { SyncMode } from './durability.js';
import type { WriteAck, WriteBatch, WriterOp, WriterStart } from './journal-writer.js';
import type { WriterRequest, WriterWorkerData } from './writer-worker.js';
import { writerWorkerSource } from './writer-worker-source.js';

/** An error crossing from the writer: its message, and its code when it had one (a SQLite code). */
export interface WriterError {
  readonly code?: string;
  readonly message: string;
}

/**
 * What the writer thread answers (plain data): an ack for a batch; for operations, nothing, or each one's answer when
 * any had one (a write beside the journal: beside-rows.ts); or the error it met.
 */
export interface WriterReply {
  readonly id: number;
  readonly ack?: WriteAck;
  readonly results?: readonly (BesideResult | undefined)[];
  readonly error?: WriterError;
}

export interface WriterThreadOptions {
  readonly dbPath: string;
  readonly platform: NodeJS.Platform;
  readonly syncMode: SyncMode;
  readonly busyTimeoutMs: number;
  readonly maxPageCount: number;
  readonly start: WriterStart;
  /** Test seam: JournalOpenOptions.writerAckHeldFromSeq. */
  readonly ackHeldFromSeq?: number | undefined;
  /** Test seam: JournalOpenOptions.writerThreadNativeBinding (else the runtime's own, sqliteNativeBinding). */
  readonly nativeBinding?: string | undefined;
}

/** Answered for a batch: the ack, or the error the writer met (the journal's failure). */
export type BatchDone = (error: Error | undefined, ack: WriteAck | undefined) => void;

/**
 * Longest the loop blocks for the writer where it must answer synchronously (the thread's start, a read that needs
 * the whole log, an audit write): past it the writer is taken as gone and the journal fails closed. Far above any
 * commit (the writer's own busy timeout bounds its wait for the lock).
 */
const syncWaitMaxMs = 60_000;
// A batch (~200 KiB at c64) and its sealed rows are the young generation's; the thread keeps little else (a daemon's RSS counts).
const workerLimits = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 64 };

/** A writer error as an Error with the code the writer saw (a SQLite code, the journal's own), if it had one. */
function errorOfReply(error: WriterError): Error {
  return error.code === undefined
    ? new Error(error.message)
    : Object.assign(new Error(error.message), { code: error.code });
}

/**
 * The loop's side of the journal's writer thread (writer-worker.ts; docs/journal-writer-thread.md, phase 2). The
 * Journal posts one planned WriteBatch at a time and hears its WriteAck on the loop (`commit`); where it must answer on
 * this turn it waits for the writer without the event loop (`drain`, `writeSync`: Atomics.wait on a word the worker
 * bumps after each answer, then receiveMessageOnPort). Answers are dispatched in the order the worker sent them.
 */
export class WriterThread {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly signal: Int32Array;
  private nextId = 1;
  private readonly waiting = new Map<number, (reply: WriterReply) => void>();
  private gone: Error | undefined;
  /** close() was asked: the thread's end is not a loss. */
  private closing = false;
  /** Launched (its connection opened): from then on a death is the journal's to hear (onLost), once. */
  private started = false;
  private lostTold = false;

  private constructor(
    options: WriterThreadOptions,
    private readonly onLost: (cause: Error) => void,
  ) {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    // [0]: answers posted (the worker bumps it after each); [1]: 1 once the thread is ending; [2]: 1 once the journal
    // failed (abandon): batches roll back.
    const shared = new SharedArrayBuffer(12);
    this.signal = new Int32Array(shared);
    const workerData: WriterWorkerData = {
      dbPath: options.dbPath,
      nativeBinding: options.nativeBinding ?? sqliteNativeBinding(),
      platform: options.platform,
      syncMode: options.syncMode,
      busyTimeoutMs: options.busyTimeoutMs,
      maxPageCount: options.maxPageCount,
      start: options.start,
      ackHeldFromSeq: options.ackHeldFromSeq,
      port: port2,
      signal: shared,
    };
    try {
      this.worker = new Worker(workerScript(), {
        eval: true,
        workerData: { ...workerData, requireFrom: fileURLToPath(import.meta.url) },
        transferList: [port2],
        resourceLimits: workerLimits,
      });
    } catch (error) {
      port1.close();
      port2.close();
      throw error;
    }
    // Neither keeps a process alive while nothing is in flight; a batch in flight refs the port (track).
    this.worker.unref();
    this.port.unref();
    this.port.on('message', (reply: WriterReply) => this.heard(reply));
    this.worker.on('error', (error) => this.lost(error));
    this.worker.on('exit', () => this.lost(new Error('the journal writer thread ended')));
  }

  /**
   * Starts the thread; resolves once its connection is open (the loop is free meanwhile), or rejects with what it met
   * opening. `onLost` is told, on the loop, if the thread later dies or stops answering.
   */
  static launch(options: WriterThreadOptions, onLost: (cause: Error) => void): Promise<WriterThread> {
    let thread: WriterThread;
    try {
      // What fails before the worker runs (its script not built, data it cannot take, a runtime without the SQLite
      // binding) is a start that failed too, answered the same way: never a throw into the loop's flush.
      thread = new WriterThread(options, onLost);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return new Promise((resolve, reject) => {
      thread.waiting.set(0, (reply) => {
        if (reply.error === undefined) {
          thread.started = true;
          resolve(thread);
          return;
        }
        void thread.worker.terminate();
        reject(errorOfReply(reply.error));
      });
      thread.port.ref();
    });
  }

  /** Whether a batch or an operation awaits its answer. */
  get busy(): boolean {
    return this.waiting.size > 0;
  }

  /**
   * Posts a batch; `base`, when given, is the committed tree it extends (the loop committed since the thread last
   * did), else it extends the thread's own last batch. `done` is called on the loop with its ack (or error), in order
   * with every other answer.
   */
  commit(batch: WriteBatch, base: TreeHead | undefined, done: BatchDone): void {
    this.post({ kind: 'commit', id: this.nextId++, batch, ...(base === undefined ? {} : { base }) }, (reply) => {
      if (reply.error !== undefined) done(errorOfReply(reply.error), undefined);
      else if (reply.ack === undefined)
        done(new Error('the journal writer answered a batch without an ack'), undefined);
      else done(undefined, reply.ack);
    });
  }

  /**
   * Writes operations in one transaction of their own, after whatever was posted before; `done` hears how it ended,
   * with each operation's answer (undefined for those that have none).
   */
  write(
    ops: readonly WriterOp[],
    done: (error: Error | undefined, results: readonly (BesideResult | undefined)[]) => void,
  ): void {
    this.post({ kind: 'ops', id: this.nextId++, ops }, (reply) =>
      reply.error === undefined
        ? done(undefined, reply.results ?? ops.map(() => undefined))
        : done(errorOfReply(reply.error), []),
    );
  }

  /**
   * The journal failed: no batch posted and not yet committed may commit now (the thread checks before each COMMIT and
   * rolls back instead); operations, such as the run's failed end, are still written.
   */
  abandon(): void {
    Atomics.store(this.signal, 2, 1);
  }

  /** Writes operations in one transaction of their own, after whatever was posted before; blocks until done. */
  writeSync(ops: readonly WriterOp[]): void {
    if (this.gone !== undefined) throw this.gone;
    let answer: WriterReply | undefined;
    this.post({ kind: 'ops', id: this.nextId++, ops }, (reply) => (answer = reply));
    this.waitFor(() => answer !== undefined);
    if (answer?.error !== undefined) throw errorOfReply(answer.error);
  }

  /** Blocks until every posted batch and operation is answered, dispatching each answer on this turn. */
  drain(): void {
    if (this.gone !== undefined) throw this.gone;
    this.waitFor(() => this.waiting.size === 0);
  }

  /** Closes the writer's connection (after everything posted), then ends the thread. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.gone === undefined) {
      let answer: WriterReply | undefined;
      this.post({ kind: 'end', id: this.nextId++ }, (reply) => (answer = reply));
      try {
        this.waitFor(() => answer !== undefined);
      } catch {
        // Gone or stuck: terminated below either way.
      }
    }
    this.gone ??= new Error('the journal writer is closed');
    this.port.close();
    await this.worker.terminate();
  }

  private post(request: WriterRequest, answered: (reply: WriterReply) => void): void {
    if (this.gone !== undefined) {
      const gone = this.gone;
      // Answered on a later turn, as a posted request would be.
      queueMicrotask(() => answered({ id: request.id, error: { code: 'JOURNAL_UNAVAILABLE', message: gone.message } }));
      return;
    }
    // Posted first: a request that cannot cross (postMessage throws) is never left waiting for an answer.
    this.port.postMessage(request);
    this.waiting.set(request.id, answered);
    this.port.ref();
  }

  private heard(reply: WriterReply): void {
    const answered = this.waiting.get(reply.id);
    if (answered === undefined) return;
    this.waiting.delete(reply.id);
    if (this.waiting.size === 0) this.port.unref();
    answered(reply);
  }

  /** The worker died or ended: every request still waiting is answered with that. */
  private lost(cause: Error): void {
    // The worker's 'exit' can overtake what it posted just before ending (its start's error, say): heard first.
    if (this.gone === undefined) this.hearPosted();
    this.gone ??= cause;
    const waiting = [...this.waiting.entries()];
    this.waiting.clear();
    this.port.unref();
    for (const [id, answered] of waiting)
      answered({
        id,
        error: { code: 'JOURNAL_UNAVAILABLE', message: `the journal writer thread failed: ${cause.message}` },
      });
    // A thread that dies, or stops answering, while the journal still counts on it (not one closed on purpose, nor one
    // whose start failed: that leaves the journal inline): the journal hears it now, idle or not, on a later turn (this
    // may run inside a synchronous wait).
    if (this.started && !this.closing && !this.lostTold) {
      this.lostTold = true;
      queueMicrotask(() => this.onLost(cause));
    }
  }

  /** Dispatches every answer already on the port, on this turn. */
  private hearPosted(): void {
    for (
      let received = receiveMessageOnPort(this.port);
      received !== undefined;
      received = receiveMessageOnPort(this.port)
    )
      this.heard(received.message as WriterReply);
  }

  /** Waits without the event loop, dispatching answers as they come, until `satisfied`. */
  private waitFor(satisfied: () => boolean): void {
    const deadline = performance.now() + syncWaitMaxMs;
    while (!satisfied()) {
      const seen = Atomics.load(this.signal, 0);
      const received = receiveMessageOnPort(this.port);
      if (received !== undefined) {
        this.heard(received.message as WriterReply);
        continue;
      }
      if (Atomics.load(this.signal, 1) === 1) {
        // The thread ended (its answers, if any, were read above): nothing still waiting will be answered.
        this.lost(new Error('the journal writer thread ended'));
        if (satisfied()) return;
        throw new CodedError('JOURNAL_UNAVAILABLE', 'the journal writer thread ended');
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        this.lost(new Error(`no answer from the journal writer within ${syncWaitMaxMs} ms`));
        throw new CodedError('JOURNAL_UNAVAILABLE', 'the journal writer did not answer');
      }
      Atomics.wait(this.signal, 0, seen, Math.min(left, 1_000));
    }
  }
}

/**
 * The bundled worker (CommonJS, every npm package external) wrapped so that its `require` resolves packages from this
 * module's own place (the checkout, the CLI bundle, the app), not from the process's working directory.
 */
function workerScript(): string {
  return [
    `'use strict';`,
    `((require) => {`,
    writerWorkerSource(),
    `})(require('node:module').createRequire(require('node:worker_threads').workerData.requireFrom));`,
  ].join('\n');
}
