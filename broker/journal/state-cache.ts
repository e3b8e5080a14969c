import type { ActionState } from '../contract/index.js';

/** Actions whose current state stays in memory: the open ones and the recently settled, most recent last. */
export const stateCacheEntriesMax = 8_192;

/**
 * The current state of recently touched actions, exactly as the last COMMIT wrote it. The journal's connection is
 * the only writer of the actions table, and an entry is set only after the COMMIT that wrote it returned, so a hit is
 * what a SELECT would answer — without the SELECT and the JSON parse on every event and every executor read.
 * Bounded: the least recently touched entry goes first.
 */
export class StateCache {
  private readonly entries = new Map<string, ActionState>();

  constructor(private readonly entriesMax: number = stateCacheEntriesMax) {}

  get(actionId: string): ActionState | undefined {
    const state = this.entries.get(actionId);
    if (state !== undefined) {
      this.entries.delete(actionId);
      this.entries.set(actionId, state);
    }
    return state;
  }

  /** After COMMIT only. */
  committed(states: Iterable<readonly [string, ActionState]>): void {
    for (const [id, state] of states) {
      this.entries.delete(id);
      this.entries.set(id, state);
    }
    while (this.entries.size > this.entriesMax) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
  }

  size(): number {
    return this.entries.size;
  }
}
