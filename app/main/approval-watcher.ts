import type { ApprovalCard, Reply } from '../../broker/contract/index.js';

/**
 * Which approval cards deserve a desktop notification, and a watcher around it. Main looks at the
 * operator API's `approvals.list` (the same answer the renderer shows) on every approvals notice of
 * the runtime's change feed (main.ts forwardChanges) and on a poll as a fallback.
 */

/** How often main looks for new cards without a notice. */
export const approvalPollMs = 1_000;
/** At most this many notifications per poll; more new cards become one summary line. */
export const notificationsPerPollMax = 3;

export interface CardNotice {
  readonly title: string;
  readonly body: string;
  /** The ticket to show when the notification is clicked (undefined for a summary). */
  readonly ticket: number | undefined;
}

/**
 * Cards that need a person now and were not pending at the last look. Only `pending` (a decision
 * for this call) and `awaiting_session` (a new agent process) ask for a person; the others are
 * waiting on the broker or a lane. The first look after start seeds the set without notifying:
 * the window opening shows those cards anyway.
 */
export function newCardsNeedingAPerson(seen: ReadonlySet<number>, cards: readonly ApprovalCard[]): ApprovalCard[] {
  return cards.filter((card) => needsAPerson(card) && !seen.has(card.ticket));
}

export function needsAPerson(card: ApprovalCard): boolean {
  return card.state === 'pending' || card.state === 'awaiting_session';
}

/** What the notification says: target and method or command, never a body or a header value. */
export function describeCards(cards: readonly ApprovalCard[]): CardNotice[] {
  const shown = cards.slice(0, notificationsPerPollMax).map((card): CardNotice => {
    const what =
      card.channel === 'http'
        ? `${card.method ?? 'HTTP'} ${card.target}${clip(card.path ?? '', 80)}`
        : `${card.target}: ${clip(card.command ?? (card.channel === 'mcp' ? 'a tool' : 'a command'), 80)}`;
    const who = card.session?.client_name ?? (card.session === null ? 'an agent' : `pid ${card.session.pid}`);
    const title =
      card.state === 'awaiting_session'
        ? `Postern: a new agent process asks to act (#${card.ticket})`
        : `Postern: approval needed (#${card.ticket})`;
    return { title, body: `${who} — ${what}`, ticket: card.ticket };
  });
  const more = cards.length - shown.length;
  if (more > 0)
    shown.push({
      title: 'Postern: more approvals waiting',
      body: `${more} more card${more === 1 ? '' : 's'} waiting for a decision`,
      ticket: undefined,
    });
  return shown;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

export interface ApprovalWatcherDeps {
  list(): Promise<Reply<{ cards: ApprovalCard[] }>>;
  notify(notice: CardNotice): void;
  /** How many cards need a person now (tray tooltip, badge). */
  onCount(count: number): void;
}

/** One poll step: reads the cards, notifies the new ones, remembers what it saw. */
export function createApprovalWatcher(deps: ApprovalWatcherDeps): { poll(): Promise<void> } {
  let seen: Set<number> | undefined;
  return {
    async poll() {
      const reply = await deps.list();
      if (!reply.ok) return;
      const waiting = reply.value.cards.filter(needsAPerson);
      if (seen !== undefined)
        for (const notice of describeCards(newCardsNeedingAPerson(seen, waiting))) deps.notify(notice);
      seen = new Set(waiting.map((card) => card.ticket));
      deps.onCount(waiting.length);
    },
  };
}
