import { useState, type FormEvent, type ReactNode } from 'react';
import type { Outcome } from '../../../broker/contract/index.js';
import { outcomeOrder } from '../store/metrics-reducer.js';

/** The filter fields the Activity modes share. The "Outcome" filter: any, or one of the four outcomes in their usual order. */
export function OutcomeSelect({
  value,
  onChange,
  testId,
}: {
  value: Outcome | '';
  onChange: (value: Outcome | '') => void;
  testId: string;
}) {
  return (
    <label>
      Outcome
      <select value={value} onChange={(e) => onChange(e.target.value as Outcome | '')} data-testid={testId}>
        <option value="">any</option>
        {outcomeOrder.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    </label>
  );
}

/** One text field of an Activity filter: typed into a draft, applied on submit. */
export function FilterTextField({
  label,
  value,
  placeholder,
  onChange,
  testId,
}: {
  label: string;
  value: string;
  placeholder: string;
  onChange: (value: string) => void;
  testId: string;
}) {
  return (
    <label>
      {label}
      <input
        type="text"
        value={value}
        placeholder={placeholder}
        maxLength={200}
        onChange={(e) => onChange(e.target.value)}
        data-testid={testId}
      />
    </label>
  );
}

/** What a filter form's fields get: the draft, a way to change it, and one text field by name. */
export interface FilterDraft<F> {
  readonly draft: F;
  set(update: Partial<F>): void;
  text(
    name: { [K in keyof F]: F[K] extends string ? K : never }[keyof F],
    label: string,
    placeholder: string,
  ): ReactNode;
}

/**
 * The filter as typed, applied on submit (so each keystroke does not start a read), with Apply and Clear: the shell
 * both Activity filters share; `children` lays out their own fields.
 */
export function FilterForm<F>({
  label,
  testId,
  applied,
  empty,
  onApply,
  children,
}: {
  label: string;
  testId: string;
  applied: F;
  empty: F;
  onApply: (filter: F) => void;
  children: (form: FilterDraft<F>) => ReactNode;
}) {
  const [draft, setDraft] = useState<F>(applied);
  const form: FilterDraft<F> = {
    draft,
    set: (update) => setDraft({ ...draft, ...update }),
    text: (name, fieldLabel, placeholder) => (
      <FilterTextField
        label={fieldLabel}
        value={draft[name] as string}
        placeholder={placeholder}
        onChange={(value) => setDraft({ ...draft, [name]: value })}
        testId={`${testId}-${String(name)}`}
      />
    ),
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onApply(draft);
  };
  return (
    <form className="activity-filter" onSubmit={submit} aria-label={label} data-testid={testId}>
      {children(form)}
      <div className="form-actions">
        <button type="submit" className="primary">
          Apply
        </button>
        <button
          type="button"
          onClick={() => {
            setDraft(empty);
            onApply(empty);
          }}
        >
          Clear
        </button>
      </div>
    </form>
  );
}
