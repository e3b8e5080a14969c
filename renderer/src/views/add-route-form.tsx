import { useState, type ChangeEvent, type FormEvent } from 'react';
import type { ApprovalMode, InjectionKind } from '../../../broker/contract/index.js';
import { routeFieldsByKey, type FormProblem, type RouteField } from '../store/config-host-input.js';
import { parseMethods, type ConfigEdit } from '../store/config-reducer.js';
import { AddForm, Field } from './add-form.js';
import {
  ApprovalField,
  TextField,
  useFileEntryForm,
  type FieldKit,
  type FileEntryForm,
  type InvalidProps,
} from './file-entry-form.js';

/** The form's fields as typed. */
interface RouteDraft {
  name: string;
  baseUrl: string;
  credential: string;
  injection: InjectionKind;
  approval: ApprovalMode;
  methods: string;
}

const emptyRouteDraft: RouteDraft = {
  name: '',
  baseUrl: '',
  credential: '',
  injection: 'bearer',
  approval: 'per_call',
  methods: '',
};

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
      intro={<p className="muted">Lanes, idempotency contracts, lookups and TLS pins are edited in the file itself.</p>}
      submit="Add route to the file"
    >
      <RouteFields id={id} draft={draft} setDraft={setDraft} problem={problem} invalid={invalid} />
    </AddForm>
  );
}

/** The add_route edit: names trimmed, no methods when none were typed (the broker's default: all). */
function routeEdit(draft: RouteDraft): Extract<ConfigEdit, { op: 'add_route' }> {
  const chosen = parseMethods(draft.methods) as Array<'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'>;
  const route = {
    name: draft.name.trim(),
    base_url: draft.baseUrl.trim(),
    credential: draft.credential.trim(),
    injection: draft.injection,
    approval: draft.approval,
    ...(chosen.length === 0 ? {} : { methods: chosen }),
  };
  return { op: 'add_route', route };
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
  const change = (field: 'name' | 'baseUrl' | 'credential' | 'methods') => (e: ChangeEvent<HTMLInputElement>) =>
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
          <option value="bearer">bearer</option>
          <option value="header">header</option>
          <option value="basic">basic</option>
          <option value="query">query</option>
        </select>
      </Field>
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

/** The form's fields as their labels say them, so a refusal names the field the person sees. */
const routeFieldLabels: Record<RouteField, string> = {
  name: 'Route name',
  base_url: 'Base URL',
  credential: 'Credential name',
  injection: 'Injection',
  approval: 'Approval',
  methods: 'Methods (comma separated; empty: all)',
};

const routeForm: FileEntryForm<RouteField> = {
  op: 'add_route',
  fieldsByKey: routeFieldsByKey,
  labels: routeFieldLabels,
  testId: 'route-form',
  what: 'route',
};
