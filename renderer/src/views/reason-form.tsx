import { useId, useState, type FormEvent } from 'react';

/** The broker's bound on a reason (broker/contract/operator-api.ts). */
export const reasonCharsMax = 2_000;

interface ReasonFormProps {
  /** The question, e.g. "Why reject #12?"; also the text box's label. */
  label: string;
  /** The submit button, e.g. "Reject #12". */
  submitLabel: string;
  /** A reason is required unless false (cancel takes an optional one). */
  required?: boolean;
  busy: boolean;
  /** Resolves true when the broker accepted it; the form then closes. */
  onSubmit(reason: string): Promise<boolean>;
  onClose(): void;
  tone?: 'danger' | 'normal';
}

/** A small inline form for a decision that needs a written reason (never window.prompt). */
export function ReasonForm({
  label,
  submitLabel,
  required = true,
  busy,
  onSubmit,
  onClose,
  tone = 'danger',
}: ReasonFormProps) {
  const [reason, setReason] = useState('');
  const id = useId();
  const trimmed = reason.trim();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (required && trimmed === '') return;
    void onSubmit(trimmed).then((accepted) => {
      if (accepted) onClose();
    });
  };
  return (
    <form className="reason-form" onSubmit={submit} aria-label={label}>
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        value={reason}
        maxLength={reasonCharsMax}
        rows={2}
        required={required}
        autoFocus
        onChange={(event) => setReason(event.target.value)}
        onKeyDown={(event) => {
          if (event.key === 'Escape') onClose();
        }}
      />
      <div className="form-actions">
        <button
          type="submit"
          className={tone === 'danger' ? 'danger' : 'primary'}
          disabled={busy || (required && trimmed === '')}
        >
          {submitLabel}
        </button>
        <button type="button" onClick={onClose} disabled={busy}>
          Back
        </button>
      </div>
    </form>
  );
}
