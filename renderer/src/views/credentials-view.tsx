import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { CredentialSummary } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { credentialInput, emptyCredentialDraft, type CredentialDraft } from '../store/credential-draft.js';
import type { CredentialsView as CredentialsViewState } from '../store/credentials-reducer.js';
import { AddForm, FormDone, FormRefusal } from './add-form.js';
import { CredentialFields, takeSecret, type ChangeDraft } from './credential-fields.js';
import { usePolling } from './use-polling.js';

/** How often the list is re-read while shown (the CLI may add or remove beside the UI). */
export const credentialsRefreshMs = 2_000;
/** Credentials by name, kind, bindings and version; a secret goes in through the form and is never shown back. */
export function CredentialsView() {
  const view = useAppStore((state) => state.credentialsView);
  const refresh = useAppStore((state) => state.refreshCredentials);
  usePolling(refresh, credentialsRefreshMs);
  const locked = view.vaultState !== null && view.vaultState !== 'unlocked';
  return (
    <section className="panel" aria-labelledby="credentials-heading" data-testid="credentials-view">
      <header className="panel-header">
        <h2 id="credentials-heading">Credentials</h2>
        <span className="muted">{view.replies === 0 ? 'loading…' : `${view.credentials.length} in the vault`}</span>
      </header>
      <p className="muted intro">
        Agents name a route or host; the broker injects the credential the configuration names. Secrets are never shown
        here, in the journal or in any log — only names, kinds, bindings and version tags.
      </p>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="credentials-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {view.replies > 0 && view.credentials.length === 0 && view.error === null && (
        <p className="empty">No credentials yet.</p>
      )}
      {view.credentials.length > 0 && (
        <table className="sessions credentials" data-testid="credentials-list">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Kind</th>
              <th scope="col">May be sent to</th>
              <th scope="col">Version</th>
              <th scope="col">
                <span className="visually-hidden">Remove</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {view.credentials.map((credential) => (
              <CredentialRow key={credential.id} credential={credential} />
            ))}
          </tbody>
        </table>
      )}
      {view.removed !== null &&
        (view.removed.ok ? (
          <p className="call-result ok" role="status" data-testid="credential-removed">
            Removed {view.removed.name}.
          </p>
        ) : (
          <p className="call-result error" role="alert" data-testid="credential-removed">
            <strong>{view.removed.error.code}</strong> {view.removed.error.message}
          </p>
        ))}
      <AddCredentialForm locked={locked} />
    </section>
  );
}

function CredentialRow({ credential }: { credential: CredentialSummary }) {
  const confirming = useAppStore((state) => state.credentialsView.confirming === credential.name);
  const removing = useAppStore((state) => state.credentialsView.removing === credential.name);
  const ask = useAppStore((state) => state.askRemoveCredential);
  const dismiss = useAppStore((state) => state.dismissRemoveCredential);
  const remove = useAppStore((state) => state.removeCredential);
  const how =
    credential.kind === 'header'
      ? `${credential.header ?? ''}: ${credential.template ?? ''}`
      : credential.kind === 'query'
        ? `?${credential.param ?? ''}=…`
        : '';
  return (
    <tr data-testid={`credential-${credential.name}`} aria-label={`Credential ${credential.name}`}>
      <td>
        <strong>{credential.name}</strong>
        <br />
        <code className="muted">{credential.id}</code>
      </td>
      <td>
        {credential.kind}
        {how !== '' && (
          <>
            <br />
            <code>{how}</code>
          </>
        )}
      </td>
      <td>
        {credential.bindings.length === 0 ? (
          <span className="muted">nowhere (no bindings)</span>
        ) : (
          credential.bindings.join(', ')
        )}
      </td>
      <td>
        <code>{credential.version_tag}</code>
      </td>
      <td>
        {confirming ? (
          <span className="form-actions">
            <span>Remove {credential.name}? Routes that name it stop working.</span>
            <button type="button" className="danger" onClick={() => void remove(credential.name)}>
              Remove {credential.name}
            </button>
            <button type="button" onClick={dismiss}>
              Keep
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => ask(credential.name)} disabled={removing}>
            {removing ? 'Removing…' : 'Remove…'}
          </button>
        )}
      </td>
    </tr>
  );
}

/**
 * Name, kind, bindings and options are ordinary form state; the secret lives only in its secret
 * field (secret-input.tsx; uncontrolled, never in React state or the store), is read once on submit and the field is
 * cleared at that moment, before the call is even answered.
 */
export function AddCredentialForm({ locked }: { locked: boolean }) {
  const adding = useAppStore((state) => state.credentialsView.adding);
  const added = useAppStore((state) => state.credentialsView.added);
  const add = useAppStore((state) => state.addCredential);
  const [draft, change] = useCredentialDraft(added);
  const secretRef = useRef<HTMLInputElement>(null);
  const id = useId();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const secret = takeSecret(secretRef.current, draft);
    if (secret === null) return;
    void add(credentialInput(draft, secret));
  };

  const intro = locked && (
    <p className="hint" data-testid="credential-form-locked">
      Unlock the vault to add a credential (removing needs no unlock).
    </p>
  );
  return (
    <AddForm
      title="Add credential"
      testId="credential-form"
      onSubmit={submit}
      intro={intro}
      locked={locked}
      busy={adding !== null ? `Adding ${adding}…` : null}
      submit="Add credential"
      answer={added === null ? null : <AddedAnswer added={added} />}
      answerBelow
    >
      <CredentialFields
        id={id}
        draft={draft}
        change={change}
        secretRef={secretRef}
        secretTestId="credential-secret"
        nameLabel="Name"
        describeKinds
        templateField
      />
      <p className="muted">
        SSH private keys are multi-line: add them with <code>postern vault add NAME --kind ssh_key --from-stdin</code>.
      </p>
    </AddForm>
  );
}

/** The draft and a setter per field; a successful add empties it but keeps the kind (the secret field was emptied at submit). */
function useCredentialDraft(added: CredentialsViewState['added']): [CredentialDraft, ChangeDraft] {
  const [draft, setDraft] = useState<CredentialDraft>(emptyCredentialDraft);
  useEffect(() => {
    if (added?.ok !== true) return;
    setDraft((d) => ({ ...emptyCredentialDraft, kind: d.kind }));
  }, [added]);
  return [draft, (field, value) => setDraft((d) => ({ ...d, [field]: value }))];
}

function AddedAnswer({ added }: { added: NonNullable<CredentialsViewState['added']> }) {
  return added.ok ? (
    <FormDone testId="credential-added">
      Added {added.name} ({added.version_tag}). Its secret is in the vault and is never shown again.
    </FormDone>
  ) : (
    <FormRefusal
      testId="credential-added"
      error={added.error}
      detail={<>{added.error.field !== undefined && <code>{added.error.field}</code>} </>}
    />
  );
}
