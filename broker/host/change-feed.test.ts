import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { ManualTimers } from '../testing/manual-timers.js';
import { createChangeFeed, topicsOfKinds, type ChangeNotice, type ChangeSubscriber } from './change-feed.js';

function feedUnderTest(limits: { subscribersMax?: number } = {}) {
  const clock = new FakeClock();
  const timers = new ManualTimers(clock);
  const feed = createChangeFeed({ clock, timers, limits: { noticeIntervalMs: 20, ...limits } });
  return { clock, timers, feed };
}

/** A subscriber that records what it hears; `accept` says whether its transport keeps up. */
function recorder(accept: () => boolean = () => true): ChangeSubscriber & { notices: ChangeNotice[]; drops: string[] } {
  const notices: ChangeNotice[] = [];
  const drops: string[] = [];
  return {
    notices,
    drops,
    notice: (notice) => {
      notices.push(notice);
      return accept();
    },
    dropped: (reason) => drops.push(reason),
  };
}

function subscribed(feed: ReturnType<typeof createChangeFeed>, subscriber: ChangeSubscriber): () => void {
  const answer = feed.subscribe(subscriber);
  if (!answer.ok) throw new Error(`subscribe refused: ${answer.reason}`);
  return answer.unsubscribe;
}

describe('the change feed', () => {
  it('sends the first change after a quiet spell on the next timer turn, with its topics and position', () => {
    const { timers, feed } = feedUnderTest();
    const sub = recorder();
    subscribed(feed, sub);
    feed.publish(['approvals', 'activity'], 7);
    expect(sub.notices).toEqual([]);
    expect(timers.advance(0)).toBe(1);
    expect(sub.notices).toEqual([{ seq: 7, topics: ['approvals', 'activity'] }]);
  });

  it('when changes come faster than the interval, coalesces them: one notice per 20 ms, topics united, the last position', () => {
    const { timers, feed } = feedUnderTest();
    const sub = recorder();
    subscribed(feed, sub);
    feed.publish(['activity'], 1);
    timers.advance(0);
    for (let seq = 2; seq <= 10_000; seq += 1) feed.publish(seq % 2 === 0 ? ['approvals'] : ['sessions'], seq);
    feed.publish(['vault'], 10_001);
    // Ten thousand publishes are one pending timer, not ten thousand queued notices.
    expect(timers.size).toBe(1);
    expect(timers.advance(19)).toBe(0);
    expect(sub.notices).toHaveLength(1);
    expect(timers.advance(1)).toBe(1);
    expect(sub.notices).toEqual([
      { seq: 1, topics: ['activity'] },
      { seq: 10_001, topics: ['approvals', 'sessions', 'vault'] },
    ]);
  });

  it('sends at once again once the interval has passed since the last notice', () => {
    const { timers, feed } = feedUnderTest();
    const sub = recorder();
    subscribed(feed, sub);
    feed.publish(['activity'], 1);
    timers.advance(0);
    timers.advance(50);
    feed.publish(['sessions'], 2);
    expect(timers.advance(0)).toBe(1);
    expect(sub.notices.map((n) => n.seq)).toEqual([1, 2]);
  });

  it('drops a subscriber whose transport backs up (or throws), tells it why, and keeps serving the others', () => {
    const { timers, feed } = feedUnderTest();
    const slow = recorder(() => false);
    const throwing: ChangeSubscriber & { drops: string[] } = {
      drops: [],
      notice: () => {
        throw new Error('socket gone');
      },
      dropped(reason) {
        this.drops.push(reason);
      },
    };
    const fine = recorder();
    subscribed(feed, slow);
    subscribed(feed, throwing);
    subscribed(feed, fine);
    feed.publish(['activity'], 1);
    timers.advance(0);
    expect(slow.drops).toEqual(['slow']);
    expect(throwing.drops).toEqual(['slow']);
    expect(feed.subscriberCount()).toBe(1);
    timers.advance(20);
    feed.publish(['approvals'], 2);
    timers.advance(0);
    expect(slow.notices).toHaveLength(1);
    expect(fine.notices.map((n) => n.seq)).toEqual([1, 2]);
  });

  it('after unsubscribe, hears nothing and is not told it was dropped', () => {
    const { timers, feed } = feedUnderTest();
    const sub = recorder();
    const unsubscribe = subscribed(feed, sub);
    unsubscribe();
    feed.publish(['activity'], 1);
    timers.advance(0);
    feed.close();
    expect(sub.notices).toEqual([]);
    expect(sub.drops).toEqual([]);
    expect(feed.subscriberCount()).toBe(0);
  });

  it('holds no pending change and no timer while nobody listens', () => {
    const { timers, feed } = feedUnderTest();
    feed.publish(['activity'], 1);
    expect(timers.size).toBe(0);
    const sub = recorder();
    subscribed(feed, sub);
    timers.advance(0);
    expect(sub.notices).toEqual([]);
  });

  it('refuses a subscriber over the cap with a typed answer', () => {
    const { feed } = feedUnderTest({ subscribersMax: 2 });
    subscribed(feed, recorder());
    subscribed(feed, recorder());
    expect(feed.subscribe(recorder())).toEqual({ ok: false, reason: 'full' });
  });

  it('on close, drops every subscriber as closed, cancels its timer and refuses new subscribers', () => {
    const { timers, feed } = feedUnderTest();
    const sub = recorder();
    subscribed(feed, sub);
    feed.publish(['activity'], 1);
    feed.close();
    feed.close();
    expect(timers.advance(0)).toBe(0);
    expect(sub.notices).toEqual([]);
    expect(sub.drops).toEqual(['closed']);
    expect(feed.subscribe(recorder())).toEqual({ ok: false, reason: 'closed' });
  });
});

describe('topicsOfKinds', () => {
  it.each<[string, Parameters<typeof topicsOfKinds>[0], string[]]>([
    ['nothing committed', [], []],
    ['an action event', ['CARD_SHOWN'], ['approvals', 'activity']],
    [
      'a session event (it changes awaiting_session cards too)',
      ['SESSION_STARTED'],
      ['approvals', 'sessions', 'activity'],
    ],
    ['a mixed commit', ['ACTION_ACCEPTED', 'SESSION_APPROVED', 'APPROVED'], ['approvals', 'sessions', 'activity']],
  ])('%s', (_when, kinds, topics) => {
    expect(topicsOfKinds(kinds)).toEqual(topics);
  });
});
