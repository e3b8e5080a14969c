import { isCredentialRequestEventKind, type EventKind } from '../contract/index.js';
import type { Clock } from '../ports/index.js';
import { systemQueueTimers, type QueueTimer, type QueueTimers } from '../queue/index.js';

/**
 * What changed, by view: the operator surfaces refresh these slices on a notice. Closed set; a
 * surface that does not know a topic refreshes everything it shows.
 */
export const changeTopics = ['approvals', 'sessions', 'activity', 'vault', 'credential_requests'] as const;
export type ChangeTopic = (typeof changeTopics)[number];

/**
 * One notice: the journal position it covers and which views may be stale. It carries no data and
 * no subject (no ticket, no session id): a surface re-reads through the operator API, which is
 * where authorization and redaction already live.
 */
export interface ChangeNotice {
  readonly seq: number;
  readonly topics: readonly ChangeTopic[];
}

export interface ChangeSubscriber {
  /** Takes one notice; false says its transport is backed up, and the feed drops it rather than queue for it. */
  notice(notice: ChangeNotice): boolean;
  /** Told once when the feed drops it: it fell behind, or the feed closed. Not told after its own unsubscribe. */
  dropped(reason: 'slow' | 'closed'): void;
}

export type Subscribed = { ok: true; unsubscribe: () => void } | { ok: false; reason: 'full' | 'closed' };

export interface ChangeFeed {
  subscribe(subscriber: ChangeSubscriber): Subscribed;
  /** Marks topics changed as of `seq`; subscribers hear it in the next coalesced notice. */
  publish(topics: readonly ChangeTopic[], seq: number): void;
  subscriberCount(): number;
  /** Drops every subscriber ('closed') and refuses new ones. Idempotent. */
  close(): void;
}

export interface ChangeFeedLimits {
  /** At most one notice per this many ms: a burst of commits (a batch, a drill) becomes one refresh. */
  noticeIntervalMs: number;
  /** Subscribers held at once (the HTTP host caps its streams lower; this bounds every surface together). */
  subscribersMax: number;
}

export const changeFeedLimits: Readonly<ChangeFeedLimits> = { noticeIntervalMs: 20, subscribersMax: 64 };

/** Which views a committed event kind may make stale. Every event is Activity; sessions change cards too (awaiting_session). */
export function topicsOfKinds(kinds: readonly EventKind[]): ChangeTopic[] {
  if (kinds.length === 0) return [];
  const topics = new Set<ChangeTopic>(['activity', 'approvals']);
  if (kinds.some((kind) => kind.startsWith('SESSION_'))) topics.add('sessions');
  if (kinds.some((kind) => isCredentialRequestEventKind(kind))) topics.add('credential_requests');
  return changeTopics.filter((topic) => topics.has(topic));
}

/**
 * The broker's change feed: publishers (journal commits, vault lock/unlock) mark topics, and every
 * subscriber gets one notice per interval at most, leading edge first (the first change after a
 * quiet spell goes out on the next timer turn, not 20 ms later). What waits between notices is one
 * set of topics and one number, whatever the rate, so a subscriber costs O(1) memory here; one whose
 * transport backs up says so and is dropped.
 */
export function createChangeFeed(options: {
  clock: Clock;
  timers?: QueueTimers;
  limits?: Partial<ChangeFeedLimits>;
}): ChangeFeed {
  const { clock } = options;
  const timers = options.timers ?? systemQueueTimers;
  const limits = { ...changeFeedLimits, ...options.limits };
  const subscribers = new Set<ChangeSubscriber>();
  const pending = new Set<ChangeTopic>();
  let pendingSeq = 0;
  let lastSentMs = Number.NEGATIVE_INFINITY;
  let timer: QueueTimer | undefined;
  let closed = false;

  const drop = (subscriber: ChangeSubscriber, reason: 'slow' | 'closed'): void => {
    if (!subscribers.delete(subscriber)) return;
    try {
      subscriber.dropped(reason);
    } catch {
      // Its own cleanup failing changes nothing here.
    }
  };
  const flush = (): void => {
    timer = undefined;
    if (closed || pending.size === 0) return;
    const notice: ChangeNotice = { seq: pendingSeq, topics: changeTopics.filter((topic) => pending.has(topic)) };
    pending.clear();
    lastSentMs = clock.nowMs();
    for (const subscriber of [...subscribers]) {
      let kept = false;
      try {
        kept = subscriber.notice(notice);
      } catch {
        kept = false;
      }
      if (!kept) drop(subscriber, 'slow');
    }
  };
  return {
    subscribe(subscriber) {
      if (closed) return { ok: false, reason: 'closed' };
      if (subscribers.size >= limits.subscribersMax) return { ok: false, reason: 'full' };
      subscribers.add(subscriber);
      return { ok: true, unsubscribe: () => void subscribers.delete(subscriber) };
    },
    publish(topics, seq) {
      // Nobody listening: nothing to remember either (a new subscriber reads everything once anyway).
      if (closed || topics.length === 0 || subscribers.size === 0) return;
      for (const topic of topics) pending.add(topic);
      pendingSeq = Math.max(pendingSeq, seq);
      if (timer !== undefined) return;
      timer = timers.set(flush, Math.max(0, lastSentMs + limits.noticeIntervalMs - clock.nowMs()));
    },
    subscriberCount: () => subscribers.size,
    close() {
      if (closed) return;
      closed = true;
      timer?.cancel();
      timer = undefined;
      pending.clear();
      for (const subscriber of [...subscribers]) drop(subscriber, 'closed');
    },
  };
}
