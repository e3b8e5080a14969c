import { useId, useRef, useState, type FormEvent } from 'react';
import type { ReplyError } from '../api/operator-api.js';
import { signInWithPasted, type OperatorSession } from '../api/page-session.js';

/**
 * A tab on the headless host that holds no session (a reload, a new tab, a daemon restarted since): the person signs
 * it in by pasting the newest sign-in URL the daemon printed on its terminal. The view the address names is kept.
 * The field's value goes straight into the exchange and is cleared at once; the secret it yields lives in memory only.
 */
export function SignInView({ session }: { session: OperatorSession }) {
  const fieldRef = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ReplyError | null>(null);
  const id = useId();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const field = fieldRef.current;
    if (field === null || field.value.trim() === '') return;
    const pasted = field.value;
    field.value = '';
    setBusy(true);
    void signInWithPasted(pasted, window.location.origin, window.fetch.bind(window), session).then((reply) => {
      setBusy(false);
      setError(reply.ok ? null : reply.error);
    });
  };

  return (
    <div className="shell">
      <header className="topbar">
        <h1>Postern</h1>
        <span className="muted">operator console</span>
      </header>
      <main>
        <section className="panel" aria-labelledby="sign-in-heading" data-testid="sign-in-view">
          <header className="panel-header">
            <h2 id="sign-in-heading">Sign in to this tab</h2>
          </header>
          <p className="muted intro">
            This tab holds no operator session. A tab keeps its session in memory only — never in browser storage, which
            any program running as you could read from disk — so a reload or a new tab signs in again, as does a tab
            left open while the daemon restarted. Paste the newest sign-in URL <code>postern daemon</code> printed on
            its terminal (each URL signs in once; the daemon prints the next one when it is used).
          </p>
          {error !== null && (
            <div className="error" role="alert" data-testid="sign-in-error" data-code={error.code}>
              <strong>{error.code}</strong>
              <span>{error.message}</span>
            </div>
          )}
          <form className="unlock-form" onSubmit={submit} aria-label="Sign in with a printed URL">
            <label htmlFor={id}>Sign-in URL</label>
            <input
              id={id}
              ref={fieldRef}
              type="password"
              name="sign-in-url"
              autoComplete="off"
              spellCheck={false}
              maxLength={2_048}
              required
              data-testid="sign-in-url"
            />
            <button type="submit" className="primary" disabled={busy} data-testid="sign-in-submit">
              {busy ? 'Signing in…' : 'Sign in'}
            </button>
          </form>
        </section>
      </main>
    </div>
  );
}
