import { useId, useState, type FormEvent } from 'react';
import type { ApprovalCard, Effect } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { retryOffer } from '../store/retry-window.js';
import { ReasonForm } from './reason-form.js';
import { useNow } from './use-now.js';

/** What a person may attest after a dispatch (never not_attempted: it was sent). */
const effectsFor: Record<'committed' | 'rejected', Effect[]> = {
  committed: ['succeeded', 'failed', 'partial_effect'],
  rejected: ['rejected', 'no_effect'],
};

/** What the retry button does, and when the broker refuses it (it answers NOT_FOUND then, shown on the card). */
export const retryExplained =
  'Resend the very request this action sent, with the same idempotency key, as its next attempt under a lease. Only for a route with an idempotency contract and a retry policy, inside the key’s window; your click is the decision.';

type OpenForm = 'abandon' | 'attest' | null;

/**
 * The ways out of a lane blocked by an unknown head (DESIGN §4): the next ticket is never released
 * as if this one had failed, so a person settles it (reconcile, attest) or abandons it with a
 * reason. Only what the operator API offers is enabled.
 */
export function BlockedHeadWaysOut({ card, busy }: { card: ApprovalCard; busy: boolean }) {
  const t = card.ticket;
  const reconcile = useAppStore((state) => state.reconcile);
  const retrySameKey = useAppStore((state) => state.retrySameKey);
  const abandon = useAppStore((state) => state.abandon);
  const [open, setOpen] = useState<OpenForm>(null);
  // The key's window is judged by this clock for what to show; the broker checks it again on the click.
  const offer = retryOffer(card, useNow());
  return (
    <div className="ways-out" role="group" aria-label={`Ways out for blocked ticket #${t}`}>
      <p className="ways-out-intro">
        The outcome of #{t} is unknown, so its lane waits. Tickets behind it are not released as if it had failed.
      </p>
      {open === null && (
        <div className="form-actions">
          {offer.offered && (
            <button
              type="button"
              disabled={busy}
              onClick={() => void retrySameKey(t, card.action_id)}
              title={retryExplained}
              aria-describedby={`retry-until-${t} retry-why-${t}`}
            >
              Retry with the same key
            </button>
          )}
          <button
            type="button"
            disabled={busy}
            onClick={() => void reconcile(t, card.action_id)}
            title="Ask the remote what happened, through the route's lookup"
          >
            Reconcile
          </button>
          <button
            type="button"
            disabled={busy}
            onClick={() => setOpen('attest')}
            title="Record what you know happened, with your basis"
          >
            Attest…
          </button>
          <button
            type="button"
            className="danger"
            disabled={busy}
            onClick={() => setOpen('abandon')}
            title="Release the lane; the outcome stays unknown"
          >
            Abandon…
          </button>
          {offer.offered ? (
            <>
              <p className="muted" id={`retry-until-${t}`} data-testid={`card-${t}-retry-until`}>
                {offer.text}
              </p>
              <span id={`retry-why-${t}`} className="visually-hidden">
                {retryExplained}
              </span>
            </>
          ) : (
            <p className="muted" data-testid={`card-${t}-no-retry`}>
              {offer.why}
            </p>
          )}
        </div>
      )}
      {open === 'abandon' && (
        <ReasonForm
          label={`Why abandon #${t}? The outcome stays unknown; the lane moves on.`}
          submitLabel={`Abandon #${t}`}
          busy={busy}
          onSubmit={(reason) => abandon(t, reason)}
          onClose={() => setOpen(null)}
        />
      )}
      {open === 'attest' && <AttestForm card={card} busy={busy} onClose={() => setOpen(null)} />}
    </div>
  );
}

function AttestForm({ card, busy, onClose }: { card: ApprovalCard; busy: boolean; onClose(): void }) {
  const attest = useAppStore((state) => state.attest);
  const [outcome, setOutcome] = useState<'committed' | 'rejected'>('committed');
  const [effect, setEffect] = useState<Effect>('succeeded');
  const [basis, setBasis] = useState('');
  const id = useId();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (basis.trim() === '') return;
    void attest(card.ticket, card.action_id, outcome, effect, basis.trim()).then((accepted) => {
      if (accepted) onClose();
    });
  };
  return (
    <form className="reason-form" onSubmit={submit} aria-label={`Attest the outcome of #${card.ticket}`}>
      <div className="inline-fields">
        <label htmlFor={`${id}-outcome`}>Outcome</label>
        <select
          id={`${id}-outcome`}
          value={outcome}
          onChange={(event) => {
            const next = event.target.value as 'committed' | 'rejected';
            setOutcome(next);
            setEffect(effectsFor[next][0] ?? 'no_effect');
          }}
        >
          <option value="committed">committed (it happened)</option>
          <option value="rejected">rejected (it did not)</option>
        </select>
        <label htmlFor={`${id}-effect`}>Effect</label>
        <select id={`${id}-effect`} value={effect} onChange={(event) => setEffect(event.target.value as Effect)}>
          {effectsFor[outcome].map((e) => (
            <option key={e} value={e}>
              {e}
            </option>
          ))}
        </select>
      </div>
      <label htmlFor={`${id}-basis`}>How do you know? (recorded as your basis)</label>
      <textarea
        id={`${id}-basis`}
        value={basis}
        maxLength={4000}
        rows={2}
        required
        onChange={(event) => setBasis(event.target.value)}
      />
      <div className="form-actions">
        <button type="submit" className="primary" disabled={busy || basis.trim() === ''}>
          Attest #{card.ticket}
        </button>
        <button type="button" onClick={onClose} disabled={busy}>
          Back
        </button>
      </div>
    </form>
  );
}
