/**
 * Where one action's time goes (bench/durable.ts table 6): the executor's journal calls timed per action, from the
 * bench op's start to its answer, split at the appends every auto-approved POST makes. Off (one proxy hop) except in
 * its own runs, so the latency and throughput tables carry none of it.
 */
import { performance } from 'node:perf_hooks';
import type { Journal } from '../broker/journal/index.js';

/** One phase: from one mark of an action to the next. The sum of the phases is the action's whole time. */
export interface Phase {
  readonly name: string;
  readonly from: string;
  readonly to: string;
}

export const phases: readonly Phase[] = [
  { name: 'parse, route, policy, validate', from: 'start', to: 'asked ACTION_ACCEPTED' },
  { name: 'admission commit (no sync)', from: 'asked ACTION_ACCEPTED', to: 'done ACTION_ACCEPTED' },
  {
    name: 'turn (queue, lane read), secret, channel set-up',
    from: 'done ACTION_ACCEPTED',
    to: 'asked DISPATCH_STARTED',
  },
  { name: 'DISPATCH_STARTED commit + sync', from: 'asked DISPATCH_STARTED', to: 'done DISPATCH_STARTED' },
  { name: 'wire, remote, response, scrub, result sealed', from: 'done DISPATCH_STARTED', to: 'asked RESULT_COMMITTED' },
  { name: 'RESULT_COMMITTED commit + sync', from: 'asked RESULT_COMMITTED', to: 'done RESULT_COMMITTED' },
  { name: 'answer (envelope, lane pump)', from: 'done RESULT_COMMITTED', to: 'end' },
];

export interface PhaseRow {
  readonly name: string;
  readonly p50: number;
  readonly p90: number;
}

/** The appends an action makes, by the kind of the first event they carry (beginDispatch: DISPATCH_STARTED). */
const timedMethods = new Set(['append', 'tryAppend', 'appendBatch', 'tryAppendBatch', 'appendLater', 'beginDispatch']);

export class PhaseClock {
  private on = false;
  private readonly marks = new Map<string, Map<string, number>>();
  readonly journal: Journal;

  constructor(journal: Journal) {
    this.journal = new Proxy(journal, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if (!this.on || typeof value !== 'function' || typeof property !== 'string' || !timedMethods.has(property))
          return value;
        return (...args: unknown[]) => {
          const named = markOf(property, args[0]);
          if (named !== undefined) this.mark(named.actionId, `asked ${named.kind}`);
          const result = (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (named !== undefined)
            void result.then(
              () => this.mark(named.actionId, `done ${named.kind}`),
              () => undefined,
            );
          return result;
        };
      },
    });
  }

  /** Starts timing: every action run from now on is marked, until rows() reads and stops. */
  start(): void {
    this.marks.clear();
    this.on = true;
  }

  /** One bench op: its start and its answer, named by the action id the answer carries. */
  op(actionId: string, startMs: number, endMs: number): void {
    if (!this.on) return;
    this.mark(actionId, 'start', startMs);
    this.mark(actionId, 'end', endMs);
  }

  /** p50 and p90 of each phase over the actions that passed every mark (the auto-approved POST's path), and stops. */
  rows(): { rows: PhaseRow[]; actions: number; total: PhaseRow } {
    this.on = false;
    const complete = [...this.marks.values()].filter((m) => phases.every((p) => m.has(p.from) && m.has(p.to)));
    const spans = (from: string, to: string): number[] =>
      complete.map((m) => (m.get(to) as number) - (m.get(from) as number)).sort((a, b) => a - b);
    const row = (name: string, values: number[]): PhaseRow => ({
      name,
      p50: values[Math.floor(values.length / 2)] ?? Number.NaN,
      p90: values[Math.floor(values.length * 0.9)] ?? Number.NaN,
    });
    return {
      rows: phases.map((p) => row(p.name, spans(p.from, p.to))),
      actions: complete.length,
      total: row('whole action', spans('start', 'end')),
    };
  }

  private mark(actionId: string, name: string, atMs = performance.now()): void {
    let marks = this.marks.get(actionId);
    if (marks === undefined) {
      marks = new Map();
      this.marks.set(actionId, marks);
    }
    // The first time a mark is reached: a retry's second DISPATCH_STARTED would not move it.
    if (!marks.has(name)) marks.set(name, atMs);
  }
}

function markOf(method: string, first: unknown): { actionId: string; kind: string } | undefined {
  if (method === 'beginDispatch')
    return typeof first === 'string' ? { actionId: first, kind: 'DISPATCH_STARTED' } : undefined;
  const event = Array.isArray(first) ? (first[0] as unknown) : first;
  if (typeof event !== 'object' || event === null) return undefined;
  const { action_id: actionId, kind } = event as { action_id?: unknown; kind?: unknown };
  return typeof actionId === 'string' && typeof kind === 'string' ? { actionId, kind } : undefined;
}
