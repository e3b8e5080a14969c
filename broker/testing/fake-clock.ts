import type { Clock } from '../ports/clock.js';

/** A clock that moves only when a test says so. */
export class FakeClock implements Clock {
  private ms: number;

  constructor(startMs = 1_767_225_600_000) {
    this.ms = startMs;
  }

  nowMs(): number {
    return this.ms;
  }

  advance(ms: number): void {
    if (!Number.isInteger(ms) || ms < 0) throw new RangeError(`a fake clock moves forward by whole ms, not ${ms}`);
    this.ms += ms;
  }

  /** Jump to an absolute time, e.g. to replay events with their recorded wall time. */
  set(ms: number): void {
    if (!Number.isInteger(ms) || ms < 0) throw new RangeError(`not a wall time: ${ms}`);
    this.ms = ms;
  }
}
