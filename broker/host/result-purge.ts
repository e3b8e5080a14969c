import type { Logger } from 'pino';
import type { RequestStore, ResultStore } from '../journal/index.js';
import type { Clock } from '../ports/index.js';
import { systemQueueTimers, type QueueTimer, type QueueTimers } from '../queue/index.js';

/** How often the sweep looks for results past their retention (and once at start). */
export const resultPurgeIntervalMs = 60 * 60 * 1000;
/** Results purged per write transaction: the journal's writers wait at most one short batch. */
export const resultPurgeBatch = 200;
/** Batches per sweep; a larger backlog is left for the next sweep rather than hold the loop. */
export const resultPurgeBatchesPerSweepMax = 50;

/** What a failed batch is logged by: its code (a SQLite code, a broker code), never its message. */
function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code !== '' ? code : 'INTERNAL';
}

export interface ResultPurgeOptions {
  readonly results: Pick<ResultStore, 'purgeExpired'>;
  /** Kept requests past their key's window are dropped in the same sweep (one bounded batch). */
  readonly requests?: Pick<RequestStore, 'dropExpired'>;
  readonly clock: Clock;
  /** `results.retention_seconds` in ms: the same boundary after which fetch_result answers RESULT_EXPIRED. */
  readonly retentionMs: number;
  readonly logger?: Logger;
  /** Default: every hour. */
  readonly intervalMs?: number;
  /** Default: the global timers, unref'd (a pending sweep never keeps the process alive); tests pass ManualTimers. */
  readonly timers?: QueueTimers;
}

export interface ResultPurge {
  /** Cancels the next batch or sweep; a batch never runs after it. A plain function: safe to pass unbound. */
  readonly stop: () => void;
}

/**
 * The periodic sweep that deletes stored result bytes after `results.retention_seconds`
 * (ResultStore.purgeExpired): once now, then every `intervalMs`. A sweep runs in bounded batches,
 * each its own transaction (on the journal's writer thread while it runs) and awaited, with a turn of
 * the event loop between them so agents and the journal are never held up by a backlog. A failure (a
 * busy or full disk, a table the file refuses) is logged by its code and the next sweep
 * tries again: purging late is harmless, because fetch_result already answers RESULT_EXPIRED from
 * the retention alone. Only result bytes are purged; the journal's events stay.
 */
export function startResultPurge(options: ResultPurgeOptions): ResultPurge {
  const { results, clock, retentionMs, logger } = options;
  const intervalMs = options.intervalMs ?? resultPurgeIntervalMs;
  const timers = options.timers ?? systemQueueTimers;
  if (!Number.isSafeInteger(retentionMs) || retentionMs < 0)
    throw new RangeError(`result retention is whole milliseconds, not ${retentionMs}`);
  if (!Number.isSafeInteger(intervalMs) || intervalMs < 1)
    throw new RangeError(`the purge interval is a positive number of milliseconds, not ${intervalMs}`);

  let stopped = false;
  let timer: QueueTimer | undefined;
  let sweep = { purged: 0, batches: 0 };

  const schedule = (delayMs: number): void => {
    if (!stopped) timer = timers.set(() => void batch(), delayMs);
  };
  const endSweep = async (): Promise<void> => {
    try {
      const dropped = (await options.requests?.dropExpired(clock.nowMs(), resultPurgeBatch)) ?? 0;
      if (dropped > 0) logger?.info({ dropped }, 'dropped kept requests past their key window');
    } catch (error) {
      if (!stopped)
        logger?.error({ code: codeOf(error) }, 'dropping expired kept requests failed; the next sweep tries again');
    }
    if (sweep.purged > 0) {
      const backlog = sweep.batches >= resultPurgeBatchesPerSweepMax;
      logger?.info(
        { purged: sweep.purged, batches: sweep.batches, backlog },
        'purged stored results past their retention',
      );
    }
    sweep = { purged: 0, batches: 0 };
    schedule(intervalMs);
  };
  // Each batch is awaited (through the journal's writer thread while it runs): the next is scheduled once it is done.
  async function batch(): Promise<void> {
    timer = undefined;
    if (stopped) return;
    let purged: number;
    try {
      purged = await results.purgeExpired(clock.nowMs(), retentionMs, resultPurgeBatch);
    } catch (error) {
      // Stopped meanwhile: the stores are closing, and what the batch met says nothing of the file.
      if (stopped) return;
      logger?.error({ code: codeOf(error) }, 'result purge failed; the next sweep tries again');
      await endSweep();
      return;
    }
    if (stopped) return;
    sweep.purged += purged;
    sweep.batches += 1;
    // A full batch may mean more are due: continue after a turn of the event loop, within the bound.
    if (purged === resultPurgeBatch && sweep.batches < resultPurgeBatchesPerSweepMax) schedule(0);
    else await endSweep();
  }

  void batch();
  return {
    stop: () => {
      stopped = true;
      timer?.cancel();
      timer = undefined;
    },
  };
}
