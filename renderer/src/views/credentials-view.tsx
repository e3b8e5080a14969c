import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { CredentialSummary } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { parseBindings, type CredentialsView as CredentialsViewState } from '../store/credentials-reducer.js';
import type { NewCredential } from '../store/credentials-slice.js';
import { AddForm, Field, FormDone, FormRefusal } from './add-form.js';
import { usePolling } from './use-polling.js';

/** How often the list is re-read while shown (the CLI may add or remove beside the UI). */
export const credentialsRefreshMs = 2_000;
/** The operator API's bound on a secret (operatorSecretCharsMax). */
const secretCharsMax = 16 * 1_024;

/** Kinds the form offers. An SSH private key is multi-line: `postern vault add NAME --kind ssh_key --from-stdin`. */
const formKinds = [
  { kind: 'bearer', label: 'bearer — Authorization: Bearer <secret>' },
  { kind: 'header', label: 'header — a named header with a template' },
  { kind: 'basic', label: 'basic — user:password' },
  { kind: 'query', label: 'query — a query parameter' },
] as const;
type FormKind = (typeof formKinds)[number]['kind'];

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
 * Name, kind, bindings and options are ordinary form state; the secret lives only in its password
 * field (uncontrolled, never in React state or the store), is read once on submit and the field is
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
    const field = secretRef.current;
    if (field === null || field.value === '' || draft.name.trim() === '') return;
    const secret = field.value;
    field.value = '';
    void add(newCredential(draft, secret));
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
      <Field id={`${id}-name`} label="Name">
        <input
          id={`${id}-name`}
          value={draft.name}
          onChange={(e) => change('name', e.target.value)}
          maxLength={64}
          required
        />
      </Field>
      <Field id={`${id}-kind`} label="Kind">
        <select id={`${id}-kind`} value={draft.kind} onChange={(e) => change('kind', e.target.value as FormKind)}>
          {formKinds.map((k) => (
            <option key={k.kind} value={k.kind}>
              {k.label}
            </option>
          ))}
        </select>
      </Field>
      <KindFields id={id} draft={draft} change={change} />
      <Field id={`${id}-bindings`} label="May be sent to (hosts or route names, comma separated)">
        <input
          id={`${id}-bindings`}
          value={draft.bindings}
          onChange={(e) => change('bindings', e.target.value)}
          maxLength={4096}
        />
      </Field>
      <Field id={`${id}-secret`} label="Secret">
        <input
          id={`${id}-secret`}
          ref={secretRef}
          type="password"
          autoComplete="off"
          maxLength={secretCharsMax}
          required
          data-testid="credential-secret"
        />
      </Field>
      <p className="muted">
        SSH private keys are multi-line: add them with <code>postern vault add NAME --kind ssh_key --from-stdin</code>.
      </p>
    </AddForm>
  );
}

/** The form's fields as typed, the secret excepted (it never leaves its password field until submit). */
interface CredentialDraft {
  name: string;
  kind: FormKind;
  bindings: string;
  header: string;
  template: string;
  param: string;
}

const emptyDraft: CredentialDraft = { name: '', kind: 'bearer', bindings: '', header: '', template: '', param: '' };

type ChangeDraft = <K extends keyof CredentialDraft>(field: K, value: CredentialDraft[K]) => void;

/** The draft and a setter per field; a successful add empties it but keeps the kind (the secret field was emptied at submit). */
function useCredentialDraft(added: CredentialsViewState['added']): [CredentialDraft, ChangeDraft] {
  const [draft, setDraft] = useState<CredentialDraft>(emptyDraft);
  useEffect(() => {
    if (added?.ok !== true) return;
    setDraft((d) => ({ ...emptyDraft, kind: d.kind }));
  }, [added]);
  return [draft, (field, value) => setDraft((d) => ({ ...d, [field]: value }))];
}

/** The add call's input: only the options the chosen kind takes, an empty template left to the broker's default. */
function newCredential(draft: CredentialDraft, secret: string): NewCredential {
  const { kind, header, template, param } = draft;
  return {
    name: draft.name.trim(),
    kind,
    secret,
    bindings: parseBindings(draft.bindings),
    ...(kind === 'header'
      ? { header: header.trim(), ...(template.trim() === '' ? {} : { template: template.trim() }) }
      : {}),
    ...(kind === 'query' ? { param: param.trim() } : {}),
  };
}

/** The fields only one kind takes: a header's name and template, a query parameter's name. */
function KindFields({ id, draft, change }: { id: string; draft: CredentialDraft; change: ChangeDraft }) {
  if (draft.kind === 'query') {
    return (
      <Field id={`${id}-param`} label="Query parameter">
        <input
          id={`${id}-param`}
          value={draft.param}
          onChange={(e) => change('param', e.target.value)}
          maxLength={128}
          required
        />
      </Field>
    );
  }
  if (draft.kind !== 'header') return null;
  return (
    <>
      <Field id={`${id}-header`} label="Header name">
        <input
          id={`${id}-header`}
          value={draft.header}
          onChange={(e) => change('header', e.target.value)}
          maxLength={128}
          required
        />
      </Field>
      <Field id={`${id}-template`} label={<>Value template (contains {'{secret}'} once; empty: just the secret)</>}>
        <input
          id={`${id}-template`}
          value={draft.template}
          onChange={(e) => change('template', e.target.value)}
          maxLength={1024}
        />
      </Field>
    </>
  );
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
