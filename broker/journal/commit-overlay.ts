import type { ActionState, SessionState } from '../contract/index.js';
import {
  projectCredentialRequests,
  advanceActionTimeline,
  emptyActionTimeline,
  idempotencyKeyId,
  type ActionTimeline,
  type BoundIdempotencyKey,
  type CredentialRequestState,
} from '../core/index.js';
import { storedCountsOf, type ActionRowWrite, type JournalStore } from './journal-store.js';
import type { WriteBatch } from './journal-writer.js';
import type { PlanContext, PlannedUnit } from './plan-unit.js';
import type { CachedAction, StateCache } from './state-cache.js';
import type { SessionBook } from './session-book.js';
import type { IdempotencyBook } from './idempotency-book.js';

/**
 * What one commit has planned so far, over what the database holds: each unit is planned against the states the
 * units before it in the same transaction left (action, session, idempotency key, the action list's moments), and
 * everything is written once at the end. Read under the write lock (BEGIN IMMEDIATE), so the idempotency check and
 * its write are one compare-and-swap.
 */
export class CommitOverlay {
  /** As loaded from the database at first touch (the counters' "before"); `states` as planned so far. */
  private readonly stored = new Map<string, ActionState | undefined>();
  private readonly states = new Map<string, ActionState>();
  private readonly sessions = new Map<string, SessionState>();
  /**
   * Sessions this batch folded over an unconfirmed row (an earlier run's, its events not folded yet: SessionBook), or
   * over a batch in flight that did: what it writes for them is no more the journal's own than that row.
   */
  private readonly overRows = new Set<string>();
  private readonly keys = new Map<string, BoundIdempotencyKey>();
  /** Credential requests have no table: the events are their record, so only what this commit planned is held. */
  private readonly credentialRequests = new Map<string, CredentialRequestState>();
  /** The action list's moments (decided, dispatched, settled), folded from the same events at their own at_ms. */
  private readonly timelines = new Map<string, ActionTimeline>();
  /** Each touched action's timeline as stored (from the cache, else read once from the database). */
  private readonly storedTimelines = new Map<string, ActionTimeline>();
  /** Touched actions whose stored row came from the cache: exactly what this connection last wrote. */
  private readonly cached = new Map<string, CachedAction>();

  /**
   * `before`: the overlays of batches planned and posted to the writer thread and not yet acked, oldest first (what
   * they wrote is not in the cache or the database yet, and this batch is written after them).
   */
  constructor(
    private readonly store: JournalStore,
    private readonly cache: Pick<StateCache, 'get'>,
    private readonly sessionBook: Pick<SessionBook, 'get' | 'isUnconfirmed'>,
    private readonly keyBook: Pick<IdempotencyBook, 'get'>,
    /** An unresolved laned action's state from memory (LaneTickets), read before the table on a cache miss. */
    private readonly unresolvedState: (id: string) => ActionState | undefined,
    /**
     * On a cache miss otherwise, the action's state folded from its own sealed events (Journal.sealedAction), or
     * `unreadable` while some of them cannot be opened (an earlier run's, the vault locked): only then the row.
     */
    private readonly sealedState: (id: string) => ActionState | undefined | 'unreadable',
    private before: readonly CommitOverlay[] = [],
  ) {}

  /** Planning is over: the overlays it was planned over are let go (only this overlay's own maps are read after). */
  planned(): void {
    this.before = [];
  }

  /**
   * A settled action no cache holds (a person's decision on an old action, recovery): folded from its sealed events, so
   * a row another process of the user edited (THREAT-MODEL) is never what a new event folds over. The row is read only
   * while those events cannot be opened.
   */
  private sealedOrStored(id: string): ActionState | undefined {
    const sealed = this.sealedState(id);
    return sealed === 'unreadable' ? this.store.loadState(id) : sealed;
  }

  /** The reads planUnit needs, answered from this overlay first. */
  readonly reads: Pick<PlanContext, 'stateOf' | 'sessionOf' | 'idempotencyKeyOf' | 'credentialRequestOf'> = {
    stateOf: (id) => {
      const planned = this.states.get(id);
      if (planned !== undefined) return planned;
      if (!this.stored.has(id)) {
        const cached = this.latestOf((overlay) => overlay.writtenOf(id)) ?? this.cache.get(id);
        if (cached !== undefined) {
          this.storedTimelines.set(id, cached.timeline);
          this.cached.set(id, cached);
        }
        this.stored.set(id, cached?.state ?? this.unresolvedState(id) ?? this.sealedOrStored(id));
      }
      return this.stored.get(id);
    },
    sessionOf: (id) => {
      const planned = this.sessions.get(id);
      if (planned !== undefined) return planned;
      const earlier = this.latestOf((overlay) => overlay.sessions.get(id));
      const base = earlier ?? this.sessionBook.get(id);
      if (earlier === undefined ? this.sessionBook.isUnconfirmed(id) : this.before.some((o) => o.overRows.has(id)))
        this.overRows.add(id);
      return base;
    },
    idempotencyKeyOf: (route, scope, key) => {
      const keyId = idempotencyKeyId(route, scope, key);
      return (
        this.keys.get(keyId) ??
        this.latestOf((overlay) => overlay.keys.get(keyId)) ??
        this.keyBook.get(route, scope, key)
      );
    },
    credentialRequestOf: (id) =>
      this.credentialRequests.get(id) ??
      this.latestOf((overlay) => overlay.credentialRequests.get(id)) ??
      projectCredentialRequests(this.store.readSubjectHeaders(id)).get(id),
  };

  /** What the newest of the batches in flight before this one planned for a subject, if any did. */
  private latestOf<T>(read: (overlay: CommitOverlay) => T | undefined): T | undefined {
    for (let i = this.before.length - 1; i >= 0; i -= 1) {
      const found = read(this.before[i] as CommitOverlay);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /** An action's row as this batch writes it (state and timeline), if it moves it: for the batches planned after. */
  writtenOf(id: string): CachedAction | undefined {
    const state = this.states.get(id);
    return state === undefined ? undefined : { state, timeline: this.timelineOf(id) };
  }

  /** A planned unit becomes the overlay the next unit is planned against. */
  absorb(plan: PlannedUnit): void {
    for (const a of plan.appended) {
      if ('state' in a)
        this.timelines.set(
          a.event.action_id,
          advanceActionTimeline(this.timelineOf(a.event.action_id), a.event, a.state),
        );
    }
    for (const [id, state] of plan.states) this.states.set(id, state);
    for (const [id, session] of plan.sessions) this.sessions.set(id, session);
    for (const [id, bound] of plan.idempotencyKeys) this.keys.set(id, bound);
    for (const [id, request] of plan.credentialRequests) this.credentialRequests.set(id, request);
  }

  /**
   * The rows this commit writes besides its events (WriteBatch's actions, sessions and idempotency keys), as data: each
   * action's new state and timeline with the counted form of its stored row and, when the cache had it, the row as this
   * connection last wrote it (JournalStore.writeState uses it only to skip the columns that did not move).
   *
   * `forThread`: the batch goes to the writer thread, and every key of it is copied twice on the way. A row the cache
   * had (or a batch in flight) then carries only its `last_seq` as written (ActionRowWrite.writtenSeq), never the row
   * or its counted form: the writer finds the row in its own memory of what it wrote, or reads it.
   */
  rowsToWrite(forThread = false): Pick<WriteBatch, 'actions' | 'sessions' | 'idempotencyKeys'> {
    const actions: ActionRowWrite[] = [];
    for (const [id, state] of this.states) {
      const timeline = this.timelineOf(id);
      const written = this.cached.get(id);
      if (forThread && written !== undefined) {
        actions.push({ state, timeline, writtenSeq: written.state.last_seq });
        continue;
      }
      const stored = this.stored.get(id);
      const counted = stored === undefined ? undefined : storedCountsOf(stored);
      // To the thread, no key that is undefined: each would cross.
      if (forThread) actions.push(counted === undefined ? { state, timeline } : { state, timeline, stored: counted });
      else actions.push({ state, timeline, stored: counted, written });
    }
    return { actions, sessions: [...this.sessions.values()], idempotencyKeys: [...this.keys.values()] };
  }

  /** The sessions this transaction wrote, for the journal's session cache once COMMIT has returned. */
  *writtenSessions(): Iterable<readonly [string, SessionState]> {
    yield* this.sessions;
  }

  /** The sessions this transaction folded over an unconfirmed row: still unconfirmed once written. */
  sessionsFoldedOverRows(): Iterable<string> {
    return this.overRows;
  }

  /** The idempotency-key bindings this transaction wrote, for the journal's key book once COMMIT has returned. */
  writtenKeys(): Iterable<BoundIdempotencyKey> {
    return this.keys.values();
  }

  /** The action states this transaction wrote, for the lanes' unresolved tickets once COMMIT has returned. */
  writtenStates(): Iterable<ActionState> {
    return this.states.values();
  }

  /** The states (and timelines) this transaction wrote, for the cache once COMMIT has returned. */
  *written(): Iterable<readonly [string, CachedAction]> {
    for (const [id, state] of this.states) yield [id, { state, timeline: this.timelineOf(id) }];
  }

  private timelineOf(id: string): ActionTimeline {
    const planned = this.timelines.get(id);
    if (planned !== undefined) return planned;
    let stored = this.storedTimelines.get(id);
    if (stored === undefined) {
      stored = this.store.loadTimeline(id) ?? emptyActionTimeline;
      this.storedTimelines.set(id, stored);
    }
    return stored;
  }
}
