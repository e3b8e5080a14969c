import { useState, type ChangeEvent, type FormEvent } from 'react';
import type { InjectionKind } from '../../../broker/contract/index.js';
import {
  emptyRouteDraft,
  routeEdit,
  routeFieldsByKey,
  type DraftText,
  type FormProblem,
  type RouteDraft,
  type RouteField,
} from '../store/config-host-input.js';
import { AddForm, Field } from './add-form.js';
import {
  ApprovalField,
  TextField,
  useFileEntryForm,
  type FieldKit,
  type FileEntryForm,
  type InvalidProps,
} from './file-entry-form.js';

/** The injections the form offers, each with what it does to a request. */
const injections: ReadonlyArray<{ kind: InjectionKind; label: string }> = [
  { kind: 'bearer', label: 'bearer (Authorization: Bearer)' },
  { kind: 'header', label: 'header (a named header)' },
  { kind: 'basic', label: 'basic (Authorization: Basic)' },
  { kind: 'query', label: 'query (a query parameter)' },
  { kind: 'aws_sigv4', label: 'aws_sigv4 (AWS Signature Version 4)' },
  { kind: 'oauth2_client_credentials', label: 'oauth2_client_credentials (a token the broker fetches)' },
];

export function AddRouteForm() {
  const { id, problem, invalid, begin, write, formProps } = useFileEntryForm(routeForm);
  const [draft, setDraft] = useState<RouteDraft>(emptyRouteDraft);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    begin();
    const edit = routeEdit(draft);
    void write(edit, edit.route.name).then((written) => {
      if (!written) return;
      // The typed fields empty; the chosen injection and approval stay for the next route.
      setDraft((d) => ({ ...emptyRouteDraft, injection: d.injection, approval: d.approval }));
    });
  };
  return (
    <AddForm
      title="Add route"
      {...formProps}
      onSubmit={submit}
      intro={
        <p className="muted">
          Lanes, idempotency contracts, lookups and TLS pins are edited in the file itself. The credential must be of
          the kind the injection uses (an aws_sigv4 access key for aws_sigv4, an oauth2_client for
          oauth2_client_credentials).
        </p>
      }
      submit="Add route to the file"
    >
      <RouteFields id={id} draft={draft} setDraft={setDraft} problem={problem} invalid={invalid} />
    </AddForm>
  );
}

function RouteFields({
  id,
  draft,
  setDraft,
  problem,
  invalid,
}: {
  id: string;
  draft: RouteDraft;
  setDraft(update: (d: RouteDraft) => RouteDraft): void;
  problem: FormProblem<RouteField> | null;
  invalid: InvalidProps<RouteField>;
}) {
  const kit: FieldKit<RouteField> = { id, problem, invalid, labels: routeFieldLabels };
  const change = (field: DraftText) => (e: ChangeEvent<HTMLInputElement>) =>
    setDraft((d) => ({ ...d, [field]: e.target.value }));
  return (
    <>
      <TextField kit={kit} field="name" value={draft.name} onChange={change('name')} maxLength={64} required />
      <TextField
        kit={kit}
        field="base_url"
        suffix="url"
        value={draft.baseUrl}
        onChange={change('baseUrl')}
        maxLength={2048}
        required
      />
      <TextField
        kit={kit}
        field="credential"
        value={draft.credential}
        onChange={change('credential')}
        maxLength={200}
        required
      />
      <Field id={`${id}-injection`} label={routeFieldLabels.injection} invalid={problem?.field === 'injection'}>
        <select
          id={`${id}-injection`}
          value={draft.injection}
          onChange={(e) => setDraft((d) => ({ ...d, injection: e.target.value as InjectionKind }))}
          {...invalid('injection')}
        >
          {injections.map(({ kind, label }) => (
            <option key={kind} value={kind}>
              {label}
            </option>
          ))}
        </select>
      </Field>
      <InjectionSettings kit={kit} draft={draft} change={change} />
      <ApprovalField
        kit={kit}
        field="approval"
        value={draft.approval}
        onChange={(approval) => setDraft((d) => ({ ...d, approval }))}
      />
      <TextField kit={kit} field="methods" value={draft.methods} onChange={change('methods')} maxLength={64} />
    </>
  );
}

/** What the chosen injection needs besides the credential: an aws_sigv4 route's scope, an OAuth2 token endpoint. */
function InjectionSettings({
  kit,
  draft,
  change,
}: {
  kit: FieldKit<RouteField>;
  draft: RouteDraft;
  change: (field: DraftText) => (e: ChangeEvent<HTMLInputElement>) => void;
}) {
  return (
    <>
      {draft.injection === 'aws_sigv4' && (
        <>
          <TextField
            kit={kit}
            field="aws_region"
            value={draft.awsRegion}
            onChange={change('awsRegion')}
            maxLength={64}
            placeholder="eu-west-1"
            required
          />
          <TextField
            kit={kit}
            field="aws_service"
            value={draft.awsService}
            onChange={change('awsService')}
            maxLength={64}
            placeholder="execute-api"
            required
          />
        </>
      )}
      {draft.injection === 'oauth2_client_credentials' && (
        <>
          <TextField
            kit={kit}
            field="token_url"
            suffix="url-token"
            value={draft.tokenUrl}
            onChange={change('tokenUrl')}
            maxLength={2048}
            placeholder="https://auth.example.com/oauth/token"
            required
          />
          <TextField kit={kit} field="scopes" value={draft.scopes} onChange={change('scopes')} maxLength={2048} />
          <TextField kit={kit} field="audience" value={draft.audience} onChange={change('audience')} maxLength={2048} />
        </>
      )}
    </>
  );
}

/** The form's fields as their labels say them, so a refusal names the field the person sees. */
const routeFieldLabels: Record<RouteField, string> = {
  name: 'Route name',
  base_url: 'Base URL',
  credential: 'Credential name',
  injection: 'Injection',
  approval: 'Approval',
  methods: 'Methods (comma separated; empty: all)',
  aws_region: 'AWS region',
  aws_service: 'AWS service (signing name)',
  token_url: 'Token URL',
  scopes: 'Scopes (space separated; optional)',
  audience: 'Audience (optional)',
};

const routeForm: FileEntryForm<RouteField> = {
  op: 'add_route',
  fieldsByKey: routeFieldsByKey,
  labels: routeFieldLabels,
  testId: 'route-form',
  what: 'route',
};
