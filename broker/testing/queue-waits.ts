import { isCodedError, type ApprovalCard } from '../contract/index.js';
import type { ApprovalQueue } from '../queue/approval-queue.js';

/** How long a test waits for the queue to reach a state before failing (not a sleep: an upper bound). */
export const queueWaitMsMax = 5_000;

/**
 * Resolves with the cards once `ready(cards)` is true, checking after every queue change (a card
 * shown, a decision, a release, a settlement); rejects after queueWaitMsMax naming what it waited for.
 */
export function waitForCards(
  queue: ApprovalQueue,
  ready: (cards: ApprovalCard[]) => boolean,
  what = 'the expected cards',
): Promise<ApprovalCard[]> {
  return new Promise((resolve, reject) => {
    let stop = (): void => undefined;
    const timer = setTimeout(() => {
      stop();
      reject(
        new Error(
          `timed out waiting for ${what}; cards: ${JSON.stringify(queue.cards().map((c) => [c.ticket, c.state, c.text]))}`,
        ),
      );
    }, queueWaitMsMax);
    const check = (): void => {
      const cards = queue.cards();
      if (!ready(cards)) return;
      clearTimeout(timer);
      stop();
      resolve(cards);
    };
    stop = queue.onChange(check);
    check();
  });
}

/** The card of one ticket in a given state. */
export function waitForCard(queue: ApprovalQueue, ticket: number, state: ApprovalCard['state']): Promise<ApprovalCard> {
  return waitForCards(
    queue,
    (cards) => cards.some((c) => c.ticket === ticket && c.state === state),
    `ticket #${ticket} ${state}`,
  ).then((cards) => cards.find((c) => c.ticket === ticket) as ApprovalCard);
}

/** Resolves when `n` cards exist (any state), for tests that start calls without knowing their tickets. */
export function waitForCardCount(queue: ApprovalQueue, n: number): Promise<ApprovalCard[]> {
  return waitForCards(queue, (cards) => cards.length >= n, `${n} cards`);
}

/**
 * Abandons every blocked head (a recorded unknown outcome blocks its lane, by design). Tests that
 * run many actions through one lane call it between cases, as a person would after checking.
 */
export async function abandonBlockedHeads(queue: ApprovalQueue): Promise<number> {
  let n = 0;
  for (const card of queue.cards()) {
    if (card.state !== 'blocked_head') continue;
    await queue.abandon(card.ticket, { kind: 'person', id: 'test-cleanup' }, 'the next test case starts');
    n += 1;
  }
  return n;
}

/** The coded error a refused decision (or any call) rejects with; fails the test if it resolves. */
export async function codedRefusal(p: Promise<unknown>): Promise<{ code: string; message: string; field?: string }> {
  try {
    await p;
  } catch (error) {
    if (isCodedError(error))
      return { code: error.code, message: error.message, ...(error.field === undefined ? {} : { field: error.field }) };
    throw error;
  }
  throw new Error('expected a refusal');
}
