import type { QueueTimer, QueueTimers } from '../queue/queue-timers.js';
import type { FakeClock } from './fake-clock.js';

/**
 * Timers that fire only when a test moves the FakeClock through `advance`, so approval expiry is
 * tested without sleeping. Due callbacks run in due order; `advance` returns how many fired.
 */
export class ManualTimers implements QueueTimers {
  private readonly pending = new Set<{ dueMs: number; run: () => void }>();

  constructor(private readonly clock: FakeClock) {}

  set(run: () => void, delayMs: number): QueueTimer {
    const entry = { dueMs: this.clock.nowMs() + Math.max(0, delayMs), run };
    this.pending.add(entry);
    return { cancel: () => this.pending.delete(entry) };
  }

  /** Moves the clock by `ms` and runs every timer that became due (bounded: each runs once). */
  advance(ms: number): number {
    this.clock.advance(ms);
    const due = [...this.pending].filter((e) => e.dueMs <= this.clock.nowMs()).sort((a, b) => a.dueMs - b.dueMs);
    for (const entry of due) {
      this.pending.delete(entry);
      entry.run();
    }
    return due.length;
  }

  get size(): number {
    return this.pending.size;
  }
}
