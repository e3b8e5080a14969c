import { useMemo } from 'react';
import type { ClosedCard } from '../store/approvals-reducer.js';
import { approvalsTally, brokerStopped } from '../store/approvals-tally.js';
import { useAppStore } from '../store/app-store.js';
import { groupCardsByLane, type LaneGroup } from '../store/card-groups.js';
import { commandNotKeptText } from '../../../broker/contract/command-not-kept.js';
import { tabHref } from '../store/hash-route.js';
import { dateTime } from '../../../broker/contract/time-words.js';
import { eventsSealed, plainOutcome, sealedForGood, sealedForGoodText, unlockHref } from '../store/sealed-action.js';
import { ApprovalCardView, LinkedTickets } from './approval-card.js';
import { CredentialRequestsSection } from './credential-request-card.js';

/** The Approvals view: open cards grouped by lane in ticket order, then the cards that closed. */
export function ApprovalsView() {
  const view = useAppStore((state) => state.approvalsView);
  const groups = useMemo(() => groupCardsByLane(view.cards), [view.cards]);
  const pendingRequests = useAppStore(
    (state) => state.credentialRequestsView.requests.filter((r) => r.status === 'pending').length,
  );
  const credentialRequestsWaiting = pendingRequests > 0;
  const stopped = brokerStopped(view);
  const tally = approvalsTally(view.cards, pendingRequests, stopped);
  return (
    <section className="panel" aria-labelledby="approvals-heading" data-testid="approvals-view">
      <header className="panel-header">
        {/* Focusable by script: where focus goes when a decision leaves no card to decide (approval-card.tsx). */}
        <h2 id="approvals-heading" tabIndex={-1}>
          Approvals
        </h2>
        <span className="muted" data-testid="approvals-count">
          {view.replies === 0 ? 'loading…' : tally.text}
        </span>
      </header>
      <p className="muted intro">
        Cards wait in ticket order within their lane. Approving a later card never lets it overtake: it runs after the
        older tickets of its lane resolve.
      </p>
      {stopped && (
        // The shell's banner already names the error; here only what it means for the cards, without repeating it.
        <p className="muted stopped-note" data-testid="approvals-stopped">
          The broker is not answering: the cards below are as last listed and none can be decided. A restart closes
          every card still waiting for a decision or approved and waiting (not_attempted, BROKER_RESTARTED); an unknown
          outcome keeps blocking its lane.
        </p>
      )}
      {view.error !== null && !stopped && (
        <div className="error" role="alert" data-testid="approvals-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
          {view.replies > 1 && <span className="muted">Showing the last cards received.</span>}
        </div>
      )}
      <CredentialRequestsSection />
      {view.replies > 0 && view.cards.length === 0 && view.error === null && !credentialRequestsWaiting && (
        <p className="empty" data-testid="approvals-empty">
          Nothing waits for you. An agent's call that needs a decision shows up here.
        </p>
      )}
      <div className={view.error !== null ? 'lanes stale' : 'lanes'}>
        {groups.map((group) => (
          <LaneSection key={group.lane ?? '(no lane)'} group={group} />
        ))}
      </div>
      {/* Shown from the start, empty too: where validation refusals are is worth knowing before any card closes. */}
      <ClosedCards closed={view.closed} />
    </section>
  );
}

function LaneSection({ group }: { group: LaneGroup }) {
  const name = group.lane ?? 'Reads outside lanes';
  const headingId = `lane-${group.lane ?? 'none'}-heading`;
  return (
    <section
      className={group.blockedBy === null ? 'lane' : 'lane blocked'}
      aria-labelledby={headingId}
      data-testid={`lane-${group.lane ?? 'none'}`}
    >
      <h3 id={headingId}>
        {group.lane === null ? name : <>Lane {name}</>}
        {group.blockedBy !== null && (
          <span className="badge attention" data-testid={`lane-${group.lane ?? 'none'}-blocked`}>
            blocked by #{group.blockedBy} (outcome unknown)
          </span>
        )}
      </h3>
      <ol className="cards">
        {group.cards.map((card) => (
          <li key={card.ticket}>
            <ApprovalCardView card={card} blockedBy={group.blockedBy} />
          </li>
        ))}
      </ol>
    </section>
  );
}

/**
 * A card never vanishes without its reason: closed cards stay listed here with what the journal says. The list and its
 * note on validation refusals show before any card has closed too, saying none has.
 */
export function ClosedCards({ closed }: { closed: readonly ClosedCard[] }) {
  return (
    <section className="closed" aria-labelledby="closed-heading" data-testid="closed-cards">
      <h3 id="closed-heading">Closed since this page opened</h3>
      {closed.length === 0 && (
        <p className="muted" data-testid="closed-cards-empty">
          No card has closed since this page opened.
        </p>
      )}
      <p className="muted" data-testid="closed-cards-scope">
        Cards only. A call refused at validation (an unknown route or host, a forbidden header, a path that escapes its
        route…) never had a card, since nobody was asked: find it in{' '}
        <a href={tabHref({ kind: 'tab', tab: 'activity', mode: 'actions' })}>Activity › Actions</a> (Outcome
        not_attempted) or with <code>postern actions list --outcome not_attempted</code>; Metrics counts it under
        validation.
      </p>
      {closed.length > 0 && (
        <ul>
          {closed.map(({ card, reason, lookupError, plain }) => (
            <li key={card.ticket} data-testid={`closed-${card.ticket}`}>
              <span className="closed-ticket">#{card.ticket}</span>{' '}
              <span className="muted" data-testid={`closed-${card.ticket}-lane`}>
                {card.lane === null ? 'a read outside lanes' : `lane ${card.lane}`}
              </span>{' '}
              · <code data-testid={`closed-${card.ticket}-target`}>{card.target}</code>{' '}
              <code data-testid={`closed-${card.ticket}-request`}>{closedRequest(card)}</code> —{' '}
              {reason === null ? (
                <UnreadReason plain={plain} lookupError={lookupError} ticket={card.ticket} />
              ) : (
                <>
                  <strong data-testid={`closed-${card.ticket}-headline`}>{reason.headline}</strong>
                  {reason.detail !== '' && (
                    <>
                      : <LinkedTickets text={reason.detail} />
                    </>
                  )}
                </>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** The request of a closed card: method and path, the command, or (an SSH card rebuilt from the journal) that it is not kept. */
function closedRequest(card: ClosedCard['card']): string {
  if (card.channel === 'http') return `${card.method ?? ''} ${card.path ?? ''}`.trim();
  if (card.command !== null) return card.channel === 'ssh' ? `$ ${card.command}` : `tool ${card.command}`;
  return `(${commandNotKeptText({ ...card, accepted: dateTime(card.accepted_at_ms) })})`;
}

/**
 * A closed card whose recorded reason is not read (yet): what the plaintext projection knows of how it closed, and
 * why the reason is missing in words — with the way to unlock when the events are sealed, never a bare code; sealed for
 * good (a broker run that never had a key recorded them), no unlock is offered, since none opens them.
 */
function UnreadReason({ plain, lookupError, ticket }: Pick<ClosedCard, 'plain' | 'lookupError'> & { ticket: number }) {
  if (lookupError === null) return <span className="muted">closed; reading its recorded reason…</span>;
  if (eventsSealed(lookupError))
    return (
      <span data-testid={`closed-${ticket}-sealed`}>
        {plain !== null ? <strong>{plainOutcome(plain)}</strong> : 'closed'}
        {sealedForGood(lookupError) ? (
          <span className="muted">; {sealedForGoodText}</span>
        ) : (
          <span className="muted">
            ; its events are sealed while the vault is locked: <a href={unlockHref}>unlock</a> to read its events
          </span>
        )}
      </span>
    );
  return (
    <span className="muted">
      closed; its recorded reason could not be read yet ({lookupError.message} — {lookupError.code}); trying again
    </span>
  );
}
