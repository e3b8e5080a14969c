import { useId, useRef, useState, type FormEvent } from 'react';
import type { CredentialRequestCard } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { countdownUrgentMs, formatCountdown } from '../store/countdown.js';
import {
  boundedText,
  cardTextCharsMax,
  docsHref,
  provisionDraftOf,
  provisionInput,
  requestStatusLine,
  requestTarget,
} from '../store/credential-requests-reducer.js';
import type { CredentialDraft } from '../store/credential-draft.js';
import { AddForm, Field } from './add-form.js';
import { CallResultLine, SessionRecordNote } from './approval-card.js';
import { CredentialFields, takeSecret, type ChangeDraft } from './credential-fields.js';
import { ReasonForm } from './reason-form.js';
import { useNow } from './use-now.js';
import { usePolling } from './use-polling.js';
import { clockTime } from '../../../broker/contract/time-words.js';

/** How often requests are re-read while the change stream is down (a pushed notice re-reads them at once). */
export const credentialRequestsRefreshMs = 1_000;
/** The vault's credential names for "Use existing" change rarely. */
const credentialNamesRefreshMs = 5_000;
const requestTopics = ['credential_requests'] as const;
const vaultTopics = ['vault'] as const;

/**
 * Agents' requests for a credential they lack (request_credential). Pending ones wait for a person: paste a
 * secret, answer with a credential the vault holds, or decline. Answered ones stay listed with how they ended.
 */
export function CredentialRequestsSection() {
  const view = useAppStore((state) => state.credentialRequestsView);
  const refresh = useAppStore((state) => state.refreshCredentialRequests);
  usePolling(refresh, credentialRequestsRefreshMs, requestTopics);
  // The broker not answering is said once, by the shell's banner: no empty section appears just to repeat it.
  const unreachable = view.error?.code === 'BROKER_UNREACHABLE';
  if (view.requests.length === 0 && (view.error === null || unreachable)) return null;
  const pending = view.requests.filter((r) => r.status === 'pending');
  const answered = view.requests.filter((r) => r.status !== 'pending');
  return (
    <section
      className="credential-requests"
      aria-labelledby="credential-requests-heading"
      data-testid="credential-requests"
    >
      <h3 id="credential-requests-heading">
        Credential requests{' '}
        <span className="muted" data-testid="credential-requests-count">
          {pending.length} waiting
        </span>
      </h3>
      {view.error !== null && !unreachable && (
        <div className="error" role="alert" data-testid="credential-requests-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      <ol className="cards">
        {[...pending, ...answered].map((card) => (
          <li key={card.request_id}>
            <CredentialRequestCardView card={card} />
          </li>
        ))}
      </ol>
    </section>
  );
}

type Mode = 'paste' | 'existing' | 'decline';

/** One request: what the agent asked for as plain, bounded text, and while it waits the three ways to answer it. */
export function CredentialRequestCardView({ card }: { card: CredentialRequestCard }) {
  const id = card.request_id;
  const busy = useAppStore((state) => state.credentialRequestsView.calls.busy[id]);
  const last = useAppStore((state) => state.credentialRequestsView.calls.last[id]);
  const decline = useAppStore((state) => state.declineCredentialRequest);
  const [mode, setMode] = useState<Mode>('paste');
  const pending = card.status === 'pending';
  return (
    <article
      className={`card credential-request request-${card.status}`}
      aria-label={`Credential request ${id}`}
      data-testid={`crq-${id}`}
    >
      <header className="card-header">
        <h4>Credential for {boundedText(requestTarget(card), cardTextCharsMax.short)}</h4>
        <span className="badge">{card.status}</span>
        {pending && card.expires_at_ms !== null && <RequestExpiry expiresAtMs={card.expires_at_ms} id={id} />}
      </header>
      <p className="card-status" data-testid={`crq-${id}-status`}>
        {requestStatusLine(card)}
      </p>
      <RequestFacts card={card} />
      {pending && !card.sealed && (
        <div className="card-actions" role="group" aria-label={`Ways to answer ${id}`}>
          {(['paste', 'existing', 'decline'] as const).map((m) => (
            <button
              key={m}
              type="button"
              aria-pressed={mode === m}
              disabled={busy !== undefined}
              onClick={() => setMode(m)}
            >
              {modeLabel[m]}
            </button>
          ))}
        </div>
      )}
      {pending && !card.sealed && mode === 'paste' && <ProvisionForm card={card} busy={busy} />}
      {pending && !card.sealed && mode === 'existing' && <ExistingForm card={card} busy={busy} />}
      {pending && mode === 'decline' && (
        <ReasonForm
          label="Why decline? (optional; the agent is told)"
          submitLabel="Decline request"
          required={false}
          busy={busy !== undefined}
          onSubmit={(reason) => decline(id, reason === '' ? undefined : reason)}
          onClose={() => setMode('paste')}
        />
      )}
      {busy !== undefined && (
        <p className="muted" role="status">
          {busy === 'decline' ? 'Declining…' : 'Provisioning…'}
        </p>
      )}
      {last !== undefined && <CallResultLine result={last} />}
    </article>
  );
}

const modeLabel: Record<Mode, string> = {
  paste: 'Paste a secret',
  existing: 'Use existing credential…',
  decline: 'Decline…',
};

function RequestExpiry({ expiresAtMs, id }: { expiresAtMs: number; id: string }) {
  const now = useNow();
  return (
    <span
      className={expiresAtMs - now < countdownUrgentMs ? 'countdown urgent' : 'countdown'}
      role="timer"
      aria-label={`Request ${id} expires`}
      title={`Expires at ${clockTime(expiresAtMs)}`}
    >
      {formatCountdown(expiresAtMs, now)}
    </span>
  );
}

/** The agent's words as text (React escapes them; the broker refused control and bidi characters), each bounded. */
function RequestFacts({ card }: { card: CredentialRequestCard }) {
  const s = card.session;
  const short = (text: string) => boundedText(text, cardTextCharsMax.short);
  if (card.sealed)
    return <p className="muted">Its details were written by an earlier run: unlock the vault to read them.</p>;
  return (
    <dl className="card-facts">
      <dt>Purpose</dt>
      <dd className="request-purpose" data-testid={`crq-${card.request_id}-purpose`}>
        {boundedText(card.purpose ?? '', cardTextCharsMax.purpose)}
      </dd>
      <dt>Agent</dt>
      <dd>
        {s === null ? (
          <span className="muted">no session recorded</span>
        ) : (
          <>
            <code title="Executable">{short(s.exe ?? '(executable unknown)')}</code> · pid {s.pid}
            {s.client_name !== null && <> · client {short(s.client_name)}</>} · session {s.status}
            <SessionRecordNote record={s.record} testId={`crq-${card.request_id}-session-record`} />
          </>
        )}
      </dd>
      {card.kind !== null && <Fact label="Kind" text={card.kind} />}
      {card.header !== null && <Fact label="Header" text={short(card.header)} />}
      {card.format !== null && <Fact label="Format" text={short(card.format)} />}
      {card.scopes.length > 0 && <Fact label="Scopes" text={card.scopes.map(short).join(', ')} />}
      {card.docs_url !== null && (
        <>
          <dt>Docs</dt>
          <dd>
            <DocsLink url={card.docs_url} id={card.request_id} />
          </dd>
        </>
      )}
    </dl>
  );
}

function Fact({ label, text }: { label: string; text: string }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>
        <code>{text}</code>
      </dd>
    </>
  );
}

/** The agent chose this URL: it is text until a person asks for it as a link, which then opens with no opener. */
function DocsLink({ url, id }: { url: string; id: string }) {
  const [shown, setShown] = useState(false);
  const href = docsHref(url);
  const text = boundedText(url, cardTextCharsMax.url);
  if (shown && href !== null) {
    return (
      <a href={href} target="_blank" rel="noopener noreferrer" data-testid={`crq-${id}-docs-link`}>
        {text}
      </a>
    );
  }
  return (
    <span data-testid={`crq-${id}-docs`}>
      <code>{text}</code>{' '}
      {href !== null && (
        <button type="button" onClick={() => setShown(true)}>
          Show link
        </button>
      )}
    </span>
  );
}

/**
 * A new credential from a pasted secret. Name, kind and bindings are ordinary state prefilled from the broker's
 * suggestion; the secret lives only in its secret field (uncontrolled, never in React state or the store) and the
 * field is emptied the moment the form is sent, before the answer, so it is gone whether the broker accepts or not.
 */
function ProvisionForm({ card, busy }: { card: CredentialRequestCard; busy: string | undefined }) {
  const provision = useAppStore((state) => state.provisionCredentialRequest);
  const [draft, setDraft] = useState<CredentialDraft>(() => provisionDraftOf(card));
  const secretRef = useRef<HTMLInputElement>(null);
  const id = useId();
  const change: ChangeDraft = (field, value) => setDraft((d) => ({ ...d, [field]: value }));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const secret = takeSecret(secretRef.current, draft);
    if (secret === null) return;
    void provision(provisionInput(card.request_id, draft, secret));
  };
  return (
    <AddForm
      title="Add it to the vault"
      testId={`crq-${card.request_id}-provision`}
      onSubmit={submit}
      busy={busy === 'provision' ? 'Provisioning…' : busy === undefined ? null : `${busy}…`}
      submit="Provision"
      intro={card.kind === 'ssh_key' && <SshKeyHint />}
    >
      <CredentialFields
        id={id}
        draft={draft}
        change={change}
        secretRef={secretRef}
        secretTestId={`crq-${card.request_id}-secret`}
        nameLabel="Credential name"
      />
    </AddForm>
  );
}

function SshKeyHint() {
  return (
    <p className="hint">
      An SSH private key is multi-line: add it with <code>postern vault add NAME --kind ssh_key --from-stdin</code>,
      then answer with “Use existing credential”.
    </p>
  );
}

/** Answers with a credential the vault holds; the binding the request suggests is offered for it. */
function ExistingForm({ card, busy }: { card: CredentialRequestCard; busy: string | undefined }) {
  const credentials = useAppStore((state) => state.credentialsView.credentials);
  const refreshCredentials = useAppStore((state) => state.refreshCredentials);
  const provisionWithExisting = useAppStore((state) => state.provisionWithExisting);
  usePolling(refreshCredentials, credentialNamesRefreshMs, vaultTopics);
  const [name, setName] = useState('');
  const [binding, setBinding] = useState(card.suggested.bindings[0] ?? '');
  const id = useId();
  const chosen = name !== '' ? name : (credentials[0]?.name ?? '');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (chosen === '') return;
    void provisionWithExisting(card.request_id, chosen, binding.trim() === '' ? undefined : binding.trim());
  };
  return (
    <AddForm
      title="Use a credential the vault holds"
      testId={`crq-${card.request_id}-existing`}
      onSubmit={submit}
      busy={busy === undefined ? null : 'Provisioning…'}
      submit="Use this credential"
      locked={credentials.length === 0}
      intro={credentials.length === 0 && <p className="hint">The vault lists no credentials yet.</p>}
    >
      <Field id={`${id}-existing`} label="Credential">
        <select id={`${id}-existing`} value={chosen} onChange={(e) => setName(e.target.value)}>
          {credentials.map((c) => (
            <option key={c.id} value={c.name}>
              {c.name} ({c.kind}; sent to {c.bindings.join(', ') || 'nowhere yet'})
            </option>
          ))}
        </select>
      </Field>
      <Field id={`${id}-binding`} label="Also allow it for (one host or route name; empty: no new binding)">
        <input id={`${id}-binding`} value={binding} onChange={(e) => setBinding(e.target.value)} maxLength={255} />
      </Field>
    </AddForm>
  );
}
