import type { Outcome } from '../../../broker/contract/index.js';
import { outcomeOrder } from '../store/metrics-reducer.js';

/** The "Outcome" filter of the Activity modes: any, or one of the four outcomes in their usual order. */
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
