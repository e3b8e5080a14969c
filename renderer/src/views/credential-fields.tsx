import type { Ref } from 'react';
import { awsSigV4Secret, formCredentialKinds, type CredentialDraft } from '../store/credential-draft.js';
import { Field } from './add-form.js';
import { SecretInput } from './secret-input.js';

/** The operator API's bound on a secret (operatorSecretCharsMax). */
const secretCharsMax = 16 * 1_024;
/** The aws_sigv4 session token's field, found through the secret field's form so both are taken at once. */
const sessionTokenFieldName = 'aws_session_token';

export type ChangeDraft = <K extends keyof CredentialDraft>(field: K, value: CredentialDraft[K]) => void;

/**
 * The fields of a new credential, shared by the Credentials tab's form and a request's provision form: name, kind,
 * the options the kind takes, bindings and the secret. Everything but the secret is the caller's state; the secret
 * stays in its secret field (uncontrolled, reached through `secretRef`) until `takeSecret` reads it at submit.
 */
export function CredentialFields({
  id,
  draft,
  change,
  secretRef,
  secretTestId,
  nameLabel,
  describeKinds = false,
  templateField = false,
}: {
  /** The form's useId(), prefixing every field's id. */
  id: string;
  draft: CredentialDraft;
  change: ChangeDraft;
  secretRef: Ref<HTMLInputElement>;
  secretTestId: string;
  nameLabel: string;
  /** Each kind's option says what the kind sends, not just its name. */
  describeKinds?: boolean;
  /** A header credential's value template is offered (else the broker's default: just the secret). */
  templateField?: boolean;
}) {
  return (
    <>
      <Field id={`${id}-name`} label={nameLabel}>
        <input
          id={`${id}-name`}
          value={draft.name}
          onChange={(e) => change('name', e.target.value)}
          maxLength={64}
          required
        />
      </Field>
      <Field id={`${id}-kind`} label="Kind">
        <select
          id={`${id}-kind`}
          value={draft.kind}
          onChange={(e) => change('kind', e.target.value as CredentialDraft['kind'])}
        >
          {formCredentialKinds.map((k) => (
            <option key={k.kind} value={k.kind}>
              {describeKinds ? k.label : k.kind}
            </option>
          ))}
        </select>
      </Field>
      <KindFields id={id} draft={draft} change={change} templateField={templateField} />
      <Field id={`${id}-bindings`} label="May be sent to (hosts or route names, comma separated)">
        <input
          id={`${id}-bindings`}
          value={draft.bindings}
          onChange={(e) => change('bindings', e.target.value)}
          maxLength={4096}
        />
      </Field>
      <Field id={`${id}-secret`} label={draft.kind === 'aws_sigv4' ? 'Secret access key' : 'Secret'}>
        <SecretInput
          id={`${id}-secret`}
          ref={secretRef}
          maxLength={secretCharsMax}
          required
          data-testid={secretTestId}
        />
      </Field>
    </>
  );
}

/**
 * The secret as typed, its field emptied at once (before the call is even answered, so it is gone whether the
 * broker accepts or not); null, the field left as it is, while the form lacks a secret or a name.
 */
export function takeSecret(field: HTMLInputElement | null, draft: CredentialDraft): string | null {
  if (field === null || field.value === '' || draft.name.trim() === '') return null;
  const secret = field.value;
  field.value = '';
  if (draft.kind !== 'aws_sigv4') return secret;
  const token = field.form?.elements.namedItem(sessionTokenFieldName);
  const sessionToken = token instanceof HTMLInputElement ? token.value : '';
  if (token instanceof HTMLInputElement) token.value = '';
  return awsSigV4Secret(draft.accessKeyId, secret, sessionToken);
}

/** The fields only one kind takes: a header's name (and, where offered, its template), a query parameter's name. */
function KindFields({
  id,
  draft,
  change,
  templateField,
}: {
  id: string;
  draft: CredentialDraft;
  change: ChangeDraft;
  templateField: boolean;
}) {
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
  if (draft.kind === 'aws_sigv4') return <AwsKeyFields id={id} draft={draft} change={change} />;
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
      {templateField && (
        <Field id={`${id}-template`} label={<>Value template (contains {'{secret}'} once; empty: just the secret)</>}>
          <input
            id={`${id}-template`}
            value={draft.template}
            onChange={(e) => change('template', e.target.value)}
            maxLength={1024}
          />
        </Field>
      )}
    </>
  );
}

/** aws_sigv4: the access key id (state: not secret) and the optional session token (a secret field, like the key). */
function AwsKeyFields({ id, draft, change }: { id: string; draft: CredentialDraft; change: ChangeDraft }) {
  return (
    <>
      <Field id={`${id}-access-key-id`} label="Access key id">
        <input
          id={`${id}-access-key-id`}
          value={draft.accessKeyId}
          onChange={(e) => change('accessKeyId', e.target.value)}
          maxLength={128}
          autoComplete="off"
          required
        />
      </Field>
      <Field id={`${id}-session-token`} label="Session token (temporary credentials only)">
        <SecretInput id={`${id}-session-token`} name={sessionTokenFieldName} maxLength={secretCharsMax} />
      </Field>
    </>
  );
}
