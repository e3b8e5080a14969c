import { useId, useState, type InputHTMLAttributes, type ReactNode } from 'react';
import type { ApprovalMode } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { formFieldOf, type FormProblem } from '../store/config-host-input.js';
import { appliesWords, type ConfigEdit, type ConfigView } from '../store/config-reducer.js';
import { Field, FormDone, FormRefusal } from './add-form.js';

/** What one add form of the file is: its edit, its fields as the broker names them and as the form labels them. */
export interface FileEntryForm<F extends string> {
  op: 'add_route' | 'add_ssh_host';
  fieldsByKey: Readonly<Record<string, F>>;
  labels: Record<F, string>;
  testId: string;
  what: string;
}

/**
 * What both add forms of the file share: the edit call, the refusal next to the form naming its field
 * (`checked`, what the form found itself, wins over an older refusal by the broker: it is about the newer
 * input), and the form's own word that its entry was written.
 */
export function useFileEntryForm<F extends string>(form: FileEntryForm<F>, checked: FormProblem<F> | null = null) {
  const busy = useAppStore((state) => state.configView.editing !== null);
  const edited = useAppStore((state) => state.configView.edited);
  const editConfig = useAppStore((state) => state.editConfig);
  const id = useId();
  const [added, setAdded] = useState<string | null>(null);
  const problem = checked ?? refusalFor(edited, form.op, form.fieldsByKey);
  const answer = (
    <>
      <FormProblemNote id={`${id}-error`} problem={problem} labels={form.labels} testId={`${form.testId}-error`} />
      <FormAdded added={added} edited={edited} op={form.op} what={form.what} testId={`${form.testId}-result`} />
    </>
  );
  return {
    id,
    problem,
    invalid: invalidProps(problem, `${id}-error`),
    /** A new submit: the word on the previous entry goes. */
    begin: () => setAdded(null),
    /** Sends the edit; once written, `name` is said under the form. Resolves true when written. */
    write: (edit: ConfigEdit, name: string) =>
      editConfig(edit).then((written) => {
        if (written) setAdded(name);
        return written;
      }),
    formProps: { testId: form.testId, noValidate: true, busy: busy ? 'Saving…' : null, answer },
  };
}

/** The broker's refusal of this form's last edit, with the field it names. */
function refusalFor<F extends string>(
  edited: ConfigView['edited'],
  op: ConfigEdit['op'],
  fields: Readonly<Record<string, F>>,
): FormProblem<F> | null {
  if (edited === null || edited.ok || edited.op !== op) return null;
  return { field: formFieldOf(edited.error, fields), code: edited.error.code, message: edited.error.message };
}

/** The attributes that tie the field a refusal names to the refusal's text. */
function invalidProps<F extends string>(problem: FormProblem<F> | null, errorId: string): InvalidProps<F> {
  return (field: F) => (problem?.field === field ? { 'aria-invalid': true, 'aria-describedby': errorId } : {});
}

export type InvalidProps<F extends string> = (field: F) => { 'aria-invalid'?: true; 'aria-describedby'?: string };

// noValidate on these forms: every refusal, the browser's included, is said in words here and names its field.
function FormProblemNote<F extends string>({
  id,
  problem,
  labels,
  testId,
}: {
  id: string;
  problem: FormProblem<F> | null;
  labels: Record<F, string>;
  testId: string;
}) {
  if (problem === null) return null;
  const label = problem.field === null ? null : labels[problem.field].replace(/ \(.*$/, '');
  const detail = label === null ? '' : <span className="form-problem-field">{label}: </span>;
  return <FormRefusal id={id} testId={testId} error={problem} detail={detail} field={problem.field ?? ''} />;
}

/** The form's own word that its entry was written (the page's banner says the same for every edit). */
function FormAdded({
  added,
  edited,
  op,
  what,
  testId,
}: {
  added: string | null;
  edited: ConfigView['edited'];
  op: ConfigEdit['op'];
  what: string;
  testId: string;
}) {
  if (added === null || edited === null || !edited.ok || edited.op !== op) return null;
  return (
    <FormDone testId={testId}>
      Added {what} <strong>{added}</strong> to {edited.file.file}: {appliesWords(edited.file.applies)}.
    </FormDone>
  );
}

export function ApprovalSelect({
  id,
  value,
  onChange,
}: {
  id: string;
  value: ApprovalMode;
  onChange(value: ApprovalMode): void;
}) {
  return (
    <select id={id} value={value} onChange={(e) => onChange(e.target.value as ApprovalMode)}>
      <option value="per_call">per_call — a person approves each call</option>
      <option value="session">session — once per agent process</option>
      <option value="none">none</option>
    </select>
  );
}

/** What every text field of one add form shares: the form's id, its refusal, the refusal's attributes, its labels. */
export interface FieldKit<F extends string> {
  readonly id: string;
  readonly problem: FormProblem<F> | null;
  readonly invalid: InvalidProps<F>;
  readonly labels: Readonly<Record<F, string>>;
}

/**
 * One text field of an add form: its label, its input (id `<form id>-<suffix>`, the field's name unless given)
 * marked invalid when the refusal names `field`, and whatever belongs under it.
 */
export function TextField<F extends string>({
  kit,
  field,
  suffix = field,
  children,
  ...input
}: {
  kit: FieldKit<F>;
  field: F;
  suffix?: string;
  children?: ReactNode;
} & Omit<InputHTMLAttributes<HTMLInputElement>, 'id' | 'children'>) {
  const id = `${kit.id}-${suffix}`;
  return (
    <Field id={id} label={kit.labels[field]} invalid={kit.problem?.field === field}>
      <input id={id} {...input} {...kit.invalid(field)} />
      {children}
    </Field>
  );
}

/** The approval field of an add form: who must approve calls through the entry. */
export function ApprovalField<F extends string>({
  kit,
  field,
  value,
  onChange,
}: {
  kit: FieldKit<F>;
  field: F;
  value: ApprovalMode;
  onChange: (value: ApprovalMode) => void;
}) {
  const id = `${kit.id}-${field}`;
  return (
    <Field id={id} label={kit.labels[field]} invalid={kit.problem?.field === field}>
      <ApprovalSelect id={id} value={value} onChange={onChange} />
    </Field>
  );
}
