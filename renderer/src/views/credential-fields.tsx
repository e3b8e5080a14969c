import type { Ref } from 'react';
import { formCredentialKinds, type CredentialDraft } from '../store/credential-draft.js';
import { Field } from './add-form.js';

/** The operator API's bound on a secret (operatorSecretCharsMax). */
const secretCharsMax = 16 * 1_024;

export type ChangeDraft = <K extends keyof CredentialDraft>(field: K, value: CredentialDraft[K]) => void;

/**
 * The fields of a new credential, shared by the Credentials tab's form and a request's provision form: name, kind,
 * the options the kind takes, bindings and the secret. Everything but the secret is the caller's state; the secret
 * stays in its password field (uncontrolled, reached through `secretRef`) until `takeSecret` reads it at submit.
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
      <Field id={`${id}-secret`} label="Secret">
        <input
          id={`${id}-secret`}
          ref={secretRef}
          type="password"
          autoComplete="off"
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
  return secret;
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
