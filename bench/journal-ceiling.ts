/**
 * The journal's own event ceiling for the event mix the broker really writes: the journal write calls
 * of one broker action are captured (whatever methods the journal offers for them: append, batches,
 * beginDispatch, a wait for durability, a result commit), then replayed for fresh action ids from N concurrent dispatchers,
 * each awaiting its own writes in order as the broker does, on a fresh group-commit journal of the
 * same kind (real file, sealed events). Replaying the broker's own calls keeps the ceiling honest when
 * the journal's commit path changes: a write that stops waiting for fsync stops waiting here too.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { ResultStore, type Journal, type ResultInput, type UnitRows } from '../broker/journal/index.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { summarize, type Summary } from './durable-measure.js';

interface Call {
  method: string;
  args: unknown[];
}

export interface CapturedAction {
  actionId: string | undefined;
  lane: string | undefined;
  calls: Call[];
}

/** Journal methods an action's writes go through (reads are the broker's cost, not the journal's ceiling). */
const actionWrite = /^((try)?append(Batch|Later)?|beginDispatch|durable|commit\w*|record\w*)$/;

/**
 * The journal with every write made on behalf of an action recorded: calls are attributed by the async
 * context `capture.run` opened for that action (so `durable()`, which names no action, counts too).
 */
export class JournalCapture {
  private readonly context = new AsyncLocalStorage<CapturedAction>();
  private readonly actions: CapturedAction[] = [];
  private done = false;
  private keptRunning = 0;
  /** The result each rows object written with RESULT_COMMITTED came from (ResultStore.rowsOf), replayed by value. */
  private readonly rowInputs = new WeakMap<object, ResultInput>();
  readonly journal: Journal;

  constructor(
    journal: Journal,
    private readonly actionsMax: number,
  ) {
    // Once the actions are kept, the proxy costs the broker one lookup per call: the bound method, cached.
    const bound = new Map<string | symbol, unknown>();
    this.journal = new Proxy(journal, {
      get: (target, property, receiver) => {
        if (this.done) return bound.get(property) ?? Reflect.get(target, property, receiver);
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        const fn = (value as (...args: unknown[]) => unknown).bind(target);
        bound.set(property, fn);
        if (typeof property !== 'string' || !actionWrite.test(property)) return fn;
        return (...args: unknown[]) => {
          const action = this.context.getStore();
          const named = actionIdOf(args[0]);
          if (action !== undefined) action.actionId ??= named;
          // A pooled socket's callbacks run in the context of the action that opened it: only a call that
          // names this action (or names none, like durable()) is this action's.
          if (action !== undefined && (named === undefined || named === action.actionId)) {
            action.lane ??= laneOf(args[0]);
            const byValue = args.map((a) => {
              const input = typeof a === 'object' && a !== null ? this.rowInputs.get(a) : undefined;
              return input === undefined ? a : { resultRows: input };
            });
            action.calls.push({ method: property, args: byValue.map((a) => copy(a, (s) => s)) });
          }
          return fn(...args);
        };
      },
    });
  }

  /** The result store with each result's rows remembered by their input, so a replay writes fresh ones. */
  results(store: ResultStore): ResultStore {
    return new Proxy(store, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property !== 'rowsOf' || typeof value !== 'function') return value;
        return (input: ResultInput): UnitRows => {
          const rows = target.rowsOf(input);
          this.rowInputs.set(rows, input);
          return rows;
        };
      },
    });
  }

  /**
   * Runs one action's work, recording its journal writes while fewer than `actionsMax` are kept. Once those have all
   * settled, the capture turns off (its async context's promise hooks too), so the broker's numbers carry none of it.
   */
  run<T>(work: () => Promise<T>): Promise<T> {
    if (this.actions.length >= this.actionsMax) {
      if (!this.done && this.keptRunning === 0) {
        this.done = true;
        this.context.disable();
      }
      return work();
    }
    const action: CapturedAction = { actionId: undefined, lane: undefined, calls: [] };
    this.actions.push(action);
    this.keptRunning += 1;
    return this.context.run(action, work).finally(() => {
      this.keptRunning -= 1;
    });
  }

  /** The last kept action (the first ones pay for warm-up paths); complete once its `run` settled. */
  captured(): CapturedAction | undefined {
    return this.actions.at(-1);
  }
}

/** Replays `action` for fresh ids from `concurrency` dispatchers for `runMs`: appends (events) per second. */
export async function replayCeiling(
  action: CapturedAction,
  concurrency: number,
  runMs: number,
): Promise<{ summary: Summary; eventsPerAction: number; mix: string }> {
  // As the daemon runs it (broker-runtime.ts): the writer thread, small batches on the loop.
  const temp = await openTempJournal({ writerThread: 'on-demand' });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  const ids = createRandomIdSource(systemClock);
  const latenciesMs: number[] = [];
  const started = performance.now();
  let replays = 0;
  try {
    const dispatcher = async (): Promise<void> => {
      while (performance.now() - started < runMs) {
        replays += 1;
        await replayAction(
          temp.journal,
          results,
          action,
          ids.newActionId(),
          `${action.lane ?? 'lane'}-${replays}`,
          latenciesMs,
        );
      }
    };
    const eventsBefore = temp.journal.stats().events;
    await Promise.all(Array.from({ length: concurrency }, dispatcher));
    const seconds = (performance.now() - started) / 1000;
    const events = temp.journal.stats().events - eventsBefore;
    // Appends per second as events (a batch call carries several): the ceiling is in events/s.
    const summary = { ...summarize(latenciesMs, seconds), count: events, perSecond: events / seconds };
    return { summary, eventsPerAction: events / replays, mix: mixOf(action) };
  } finally {
    results.close();
    await temp.dispose();
  }
}

/**
 * Replays `action`'s journal writes once as action `newId` in lane `newLane`, each awaited in order as the broker does
 * (a held observation, appendLater, is not awaited where it is appended, as in the broker); the time each awaited call
 * took is pushed to `latenciesMs`.
 */
export async function replayAction(
  journal: Journal,
  results: ResultStore,
  action: CapturedAction,
  newId: string,
  newLane: string,
  latenciesMs: number[] = [],
): Promise<void> {
  // An action id's tail also names its results (res_<tail>_<attempt>).
  const rename = (s: string): string =>
    s === action.lane
      ? newLane
      : action.actionId === undefined
        ? s
        : s.replaceAll(action.actionId.slice(4), newId.slice(4));
  const held: Promise<unknown>[] = [];
  for (const call of action.calls) {
    const method = (journal as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[call.method];
    const t0 = performance.now();
    const done = method?.apply(
      journal,
      call.args.map((a) =>
        isRecord(a) && 'resultRows' in a
          ? results.rowsOf(copy(a['resultRows'], rename) as ResultInput)
          : copy(a, rename),
      ),
    );
    if (call.method === 'appendLater') {
      held.push(Promise.resolve(done));
      continue;
    }
    await done;
    latenciesMs.push(performance.now() - t0);
  }
  await Promise.all(held);
}

/** `append ACTION_ACCEPTED, beginDispatch, …`: what was replayed, for the table. */
function mixOf(action: CapturedAction): string {
  return action.calls
    .map((c) => {
      const kinds = [c.args[0]]
        .flat()
        .map((a) => (isRecord(a) && typeof a['kind'] === 'string' ? a['kind'] : undefined))
        .filter((k) => k !== undefined);
      return kinds.length === 0 ? c.method : `${c.method} ${kinds.join('+')}`;
    })
    .join(', ');
}

function actionIdOf(first: unknown): string | undefined {
  const head = Array.isArray(first) ? (first[0] as unknown) : first;
  if (typeof head === 'string') return head;
  return isRecord(head) && typeof head['action_id'] === 'string' ? head['action_id'] : undefined;
}

function laneOf(first: unknown): string | undefined {
  const head = Array.isArray(first) ? (first[0] as unknown) : first;
  return isRecord(head) && typeof head['lane'] === 'string' ? head['lane'] : undefined;
}

/** A deep copy with every string passed through `rename` (Buffers copied, not turned into arrays). */
function copy(value: unknown, rename: (s: string) => string): unknown {
  if (typeof value === 'string') return rename(value);
  if (Buffer.isBuffer(value)) return Buffer.from(value);
  if (Array.isArray(value)) return value.map((v) => copy(v, rename));
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v, rename)]));
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}
