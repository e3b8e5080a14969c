import {
  useId,
  useRef,
  useState,
  useSyncExternalStore,
  type ClipboardEvent,
  type FormEvent,
  type RefObject,
} from 'react';
import type { ReplyError } from '../api/operator-api.js';
import { pagePassphrasePrompt, signInWithCode, type OperatorSession } from '../api/page-session.js';
import { SecretInput } from './secret-input.js';

/**
 * A tab on the headless host that holds no session: opened with a printed sign-in URL, reloaded, a new tab, or left
 * open while the daemon restarted. The person types the sign-in code `postern daemon` printed beside the URL (never in
 * it: opening a URL puts it on a browser's command line, which every program running as the person can read); a tab
 * not opened with a URL also takes the newest printed URL. The view the address names is kept. The fields' values go
 * straight into the exchange and are cleared at once; the secret it yields lives in memory only.
 */
export function SignInView({ session }: { session: OperatorSession }) {
  const urlRef = useRef<HTMLInputElement>(null);
  const codeRef = useRef<HTMLInputElement>(null);
  const passphraseRef = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ReplyError | null>(null);
  const [otherUrl, setOtherUrl] = useState(false);
  const [pasteRefused, setPasteRefused] = useState(false);
  const addressToken = useSyncExternalStore(session.subscribe, session.addressToken);
  const askUrl = addressToken === null || otherUrl;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const code = codeRef.current;
    const url = urlRef.current;
    const passphrase = passphraseRef.current;
    if (code === null || code.value.trim() === '') return;
    const input = {
      code: code.value,
      ...(askUrl && url !== null ? { url: url.value } : {}),
      ...(passphrase !== null && passphrase.value !== '' ? { passphrase: passphrase.value } : {}),
    };
    code.value = '';
    if (url !== null) url.value = '';
    if (passphrase !== null) passphrase.value = '';
    setBusy(true);
    const prompt = pagePassphrasePrompt();
    void signInWithCode(input, window.location.origin, window.fetch.bind(window), session, prompt).then((reply) => {
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
          <SignInIntro askUrl={askUrl} />
          {error !== null && (
            <div className="error" role="alert" data-testid="sign-in-error" data-code={error.code}>
              <strong>{error.code}</strong>
              <span>{error.message}</span>
            </div>
          )}
          <form className="unlock-form" onSubmit={submit} aria-label="Sign in with a printed URL and its code">
            <SignInFields
              askUrl={askUrl}
              refs={{ url: urlRef, code: codeRef, passphrase: passphraseRef }}
              onCodePasted={() => setPasteRefused(true)}
            />
            <button type="submit" className="primary" disabled={busy} data-testid="sign-in-submit">
              {busy ? 'Signing in…' : 'Sign in'}
            </button>
          </form>
          {pasteRefused && (
            <p className="muted" role="status" data-testid="sign-in-code-paste-refused">
              Type the code rather than paste it: a copied code goes through the clipboard, which any program running as
              you can read before you sign in.
            </p>
          )}
          {!askUrl && (
            <button
              type="button"
              className="link-button"
              onClick={() => setOtherUrl(true)}
              data-testid="sign-in-other-url"
            >
              Sign in with another printed URL
            </button>
          )}
        </section>
      </main>
    </div>
  );
}

/** The fields of the sign-in: the printed URL when needed, the code (typed, never pasted), the optional passphrase. */
function SignInFields(props: {
  askUrl: boolean;
  refs: Record<'url' | 'code' | 'passphrase', RefObject<HTMLInputElement | null>>;
  onCodePasted: () => void;
}) {
  return (
    <>
      {props.askUrl && (
        <SecretField label="Sign-in URL" name="sign-in-url" fieldRef={props.refs.url} maxLength={2_048} />
      )}
      <SecretField
        label="Sign-in code"
        name="sign-in-code"
        fieldRef={props.refs.code}
        maxLength={32}
        numeric
        onPaste={(event) => {
          // A pasted code went through the clipboard, which every program running as the person can read.
          event.preventDefault();
          props.onCodePasted();
        }}
      />
      <SecretField
        label="Vault passphrase (to decide in this tab; leave empty to look only)"
        name="sign-in-passphrase"
        fieldRef={props.refs.passphrase}
        maxLength={1_024}
        optional
      />
    </>
  );
}

/** What the person is asked for: the code only when the page was opened with a printed URL, else the URL and code. */
function SignInIntro({ askUrl }: { askUrl: boolean }) {
  if (askUrl)
    return (
      <p className="muted intro">
        This tab holds no operator session. A tab keeps its session in memory only — never in browser storage, which any
        program running as you could read from disk — so a reload or a new tab signs in again, as does a tab left open
        while the daemon restarted. Paste the newest sign-in URL <code>postern daemon</code> printed on its terminal and
        type the sign-in code printed beside it (each URL signs in once; the daemon prints the next one when it is
        used). Give the vault passphrase too if you will decide in this tab (approve, lock, change anything): the code
        shows only that someone read the daemon&apos;s terminal, which a program that starts a daemon of its own does
        too.
      </p>
    );
  return (
    <p className="muted intro" data-testid="sign-in-code-intro">
      Type the sign-in code <code>postern daemon</code> printed beside this URL (<code>Sign-in code: …</code>). The code
      is never in the URL: opening a link puts it on a browser&apos;s command line, where any program running as you can
      read it, so the URL alone signs nothing in. Check first that the address bar shows exactly the address the daemon
      printed (<code>http://127.0.0.1:PORT</code>): another program can serve a page that looks like this one on another
      port. Give the vault passphrase too if you will decide in this tab (approve, lock, change anything): the code
      shows only that someone read the daemon&apos;s terminal, which a program that starts a daemon of its own does too.
    </p>
  );
}

/** A masked field whose value only the submit reads (and clears); nothing keeps it in React state. */
function SecretField(props: {
  label: string;
  name: string;
  fieldRef: RefObject<HTMLInputElement | null>;
  maxLength: number;
  numeric?: boolean;
  /** Not needed to sign in (the vault passphrase: a tab without it reads, and asks for it at its first decision). */
  optional?: boolean;
  onPaste?: (event: ClipboardEvent<HTMLInputElement>) => void;
}) {
  const id = useId();
  return (
    <>
      <label htmlFor={id}>{props.label}</label>
      <SecretInput
        id={id}
        ref={props.fieldRef}
        name={props.name}
        maxLength={props.maxLength}
        required={props.optional !== true}
        {...(props.numeric === true ? { inputMode: 'numeric' as const, autoFocus: true } : {})}
        {...(props.onPaste === undefined ? {} : { onPaste: props.onPaste })}
        data-testid={props.name}
      />
    </>
  );
}
