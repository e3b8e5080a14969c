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
 * Values as the last COMMIT wrote them, by subject id. The journal's connection is the only writer of the state
 * tables, and an entry is set only after the COMMIT that wrote it returned, so a hit is what a SELECT would answer —
 * without the SELECT and the JSON parse. Bounded: the least recently touched entry goes first.
 */
export class RecentCache<V> {
  private readonly entries = new Map<string, V>();

  constructor(private readonly entriesMax: number) {}

  get(id: string): V | undefined {
    const entry = this.entries.get(id);
    if (entry !== undefined) {
      this.entries.delete(id);
      this.entries.set(id, entry);
    }
    return entry;
  }

  /** get() without touching the entry's recency (a lane read must not keep settled actions in memory). */
  peek(id: string): V | undefined {
    return this.entries.get(id);
  }

  /** After COMMIT only. */
  committed(written: Iterable<readonly [string, V]>): void {
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

  delete(id: string): void {
    this.entries.delete(id);
  }

  clear(): void {
    this.entries.clear();
  }
}

/** The current state (and timeline) of recently touched actions: the open ones and the recently settled. */
export class StateCache extends RecentCache<CachedAction> {
  constructor(entriesMax: number = stateCacheEntriesMax) {
    super(entriesMax);
  }
}
