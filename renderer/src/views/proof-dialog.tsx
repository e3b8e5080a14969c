import { useId, useRef, useSyncExternalStore, type FormEvent } from 'react';
import type { PagePassphrasePrompt } from '../api/person-proof.js';
import { SecretInput } from './secret-input.js';

/**
 * "Confirm it is you": asked when this tab's first decision (an approval, a lock, an edit) was refused because the tab
 * has not presented the vault passphrase in this run of the broker. The sign-in code proves only that someone read the
 * daemon's terminal — a program that starts its own daemon reads it too — so the passphrase is what makes the tab's
 * decisions a person's. Confirmed, the tab stays proven until it is closed or reloaded, and the decision is sent again;
 * cancelled, nothing was decided. The field's value goes straight to the broker and is cleared; nothing keeps it.
 */
export function ProofDialog({ prompt }: { prompt: PagePassphrasePrompt }) {
  const request = useSyncExternalStore(prompt.subscribe, prompt.current);
  const fieldRef = useRef<HTMLInputElement>(null);
  const headingId = useId();
  const fieldId = useId();
  if (request === null) return null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const field = fieldRef.current;
    if (field === null || field.value === '') return;
    const passphrase = field.value;
    field.value = '';
    prompt.answer(passphrase);
  };
  return (
    <div
      className="proof-backdrop"
      onKeyDown={(event) => {
        if (event.key === 'Escape') prompt.answer(null);
      }}
    >
      <section
        className="panel proof-dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby={headingId}
        data-testid="proof-dialog"
      >
        <header className="panel-header">
          <h2 id={headingId}>Confirm it is you</h2>
        </header>
        <p className="muted intro">
          Type the vault passphrase to decide in this tab. The sign-in code shows only that someone read the
          daemon&apos;s terminal — a program that starts a daemon of its own reads it too — so Postern records a
          decision as yours only from a tab that showed the passphrase. This tab asks once; a reload signs it out.
        </p>
        <p className="muted" data-testid="proof-why">
          {request.why}
        </p>
        {request.error !== null && (
          <div className="error" role="alert" data-testid="proof-error" data-code={request.error.code}>
            <strong>{request.error.code}</strong>
            <span>{request.error.message}</span>
          </div>
        )}
        <form className="unlock-form" onSubmit={submit} aria-label="Confirm with the vault passphrase">
          <label htmlFor={fieldId}>Vault passphrase</label>
          <SecretInput
            id={fieldId}
            ref={fieldRef}
            name="proof-passphrase"
            maxLength={1_024}
            required
            autoFocus
            data-testid="proof-passphrase"
          />
          <button type="submit" className="primary" data-testid="proof-submit">
            Confirm
          </button>
          <button type="button" onClick={() => prompt.answer(null)} data-testid="proof-cancel">
            Cancel
          </button>
        </form>
      </section>
    </div>
  );
}
