import type { ActionState } from '../contract/index.js';
import type { ActionTimeline } from '../core/index.js';

/** An action's current state and its action-list moments, as the last COMMIT wrote them. */
export interface CachedAction {
  readonly state: ActionState;
  readonly timeline: ActionTimeline;
}

/** Actions whose current state stays in memory: the open ones and the recently settled, most recent last. */
export const stateCacheEntriesMax = 8_192;

/**
 * The current state (and timeline) of recently touched actions, exactly as the last COMMIT wrote them. The journal's connection is
 * the only writer of the actions table, and an entry is set only after the COMMIT that wrote it returned, so a hit is
 * what a SELECT would answer — without the SELECT and the JSON parse on every event and every executor read.
 * Bounded: the least recently touched entry goes first.
 */
export class StateCache {
  private readonly entries = new Map<string, CachedAction>();

  constructor(private readonly entriesMax: number = stateCacheEntriesMax) {}

  get(actionId: string): CachedAction | undefined {
    const entry = this.entries.get(actionId);
    if (entry !== undefined) {
      this.entries.delete(actionId);
      this.entries.set(actionId, entry);
    }
    return entry;
  }

  /** get() without touching the entry's recency (a lane read must not keep settled actions in memory). */
  peek(actionId: string): CachedAction | undefined {
    return this.entries.get(actionId);
  }

  /** After COMMIT only. */
  committed(written: Iterable<readonly [string, CachedAction]>): void {
    for (const [id, entry] of written) {
      this.entries.delete(id);
      this.entries.set(id, entry);
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
