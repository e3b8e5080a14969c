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
