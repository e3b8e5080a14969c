import { describe, expect, it } from 'vitest';
import { attestClassification } from './attest-outcome.js';

describe('attestClassification', () => {
  it('records a person’s word as operator_attested with retry never', () => {
    expect(attestClassification('committed', 'succeeded')).toEqual({
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
      code: null,
      effect: 'succeeded',
      outcome_basis: 'operator_attested',
      source: 'operator_attested',
    });
    expect(attestClassification('rejected', 'no_effect')).toMatchObject({
      outcome: 'rejected',
      code: 'ATTESTED_REJECTED',
      source: 'operator_attested',
    });
  });

  it('refuses an effect that contradicts the attested outcome, naming the field', () => {
    expect(() => attestClassification('committed', 'no_effect')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'effect' }),
    );
    expect(() => attestClassification('rejected', 'succeeded')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'effect' }),
    );
  });
});
