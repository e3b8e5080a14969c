import type { FormEvent, ReactNode } from 'react';

/**
 * The shell every "Add …" form shares (route, SSH host, credential): a form named by its heading, the
 * field rows in one fieldset that is disabled while the call runs (or while it cannot be made), and the
 * submit button that says what is happening. The answer to the last submit is said next to the form.
 */
export function AddForm({
  title,
  testId,
  onSubmit,
  noValidate = false,
  intro,
  locked = false,
  busy,
  submit,
  answer,
  answerBelow = false,
  children,
}: {
  /** The form's accessible name and its heading. */
  title: string;
  testId: string;
  onSubmit(event: FormEvent): void;
  /** Off the browser's own bubbles: every refusal is then said in words next to the form, naming its field. */
  noValidate?: boolean;
  /** Under the heading: what the form is for, or why it cannot be used now. */
  intro?: ReactNode;
  /** The fields are disabled though no call runs (e.g. the vault is locked). */
  locked?: boolean;
  /** What the button says while the call runs (the fields are disabled meanwhile); null when idle. */
  busy: string | null;
  submit: string;
  /** The answer to the last submit: above the button, or under the whole form with `answerBelow`. */
  answer?: ReactNode;
  answerBelow?: boolean;
  children: ReactNode;
}) {
  return (
    <form
      className="credential-form"
      onSubmit={onSubmit}
      aria-label={title}
      noValidate={noValidate}
      data-testid={testId}
    >
      <h3>{title}</h3>
      {intro}
      <fieldset disabled={locked || busy !== null}>
        {children}
        {!answerBelow && answer}
        <div className="form-actions">
          <button type="submit" className="primary">
            {busy ?? submit}
          </button>
        </div>
      </fieldset>
      {answerBelow && answer}
    </form>
  );
}

/** One field row: its label, its control(s) and what belongs under them; `invalid` marks the field a refusal names. */
export function Field({
  id,
  label,
  invalid = false,
  children,
}: {
  id: string;
  label: ReactNode;
  invalid?: boolean;
  children: ReactNode;
}) {
  return (
    <div className={invalid ? 'field invalid' : 'field'}>
      <label htmlFor={id}>{label}</label>
      {children}
    </div>
  );
}

/**
 * A refusal said next to the form that caused it. `field` (when the form maps the refusal to one of its
 * fields, '' when to none) marks it as a field problem, so `id` can describe the invalid control.
 */
export function FormRefusal({
  testId,
  error,
  detail,
  id,
  field,
}: {
  testId: string;
  error: { code: string; message: string };
  /** Between the code and the message: the field it names, as the form says it. */
  detail?: ReactNode;
  id?: string;
  field?: string;
}) {
  return (
    <p
      id={id}
      className={field === undefined ? 'call-result error' : 'call-result error form-problem'}
      role="alert"
      data-testid={testId}
      data-field={field}
    >
      <strong>{error.code}</strong> {detail}
      {error.message}
    </p>
  );
}

/** The form's own word that its entry was written. */
export function FormDone({ testId, children }: { testId: string; children: ReactNode }) {
  return (
    <p className="call-result ok" role="status" data-testid={testId}>
      {children}
    </p>
  );
}
