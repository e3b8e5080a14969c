import { describe, expect, it } from 'vitest';
import { decisionText } from './operator-actor.js';

describe('decisionText: who decided an action, as every surface words it', () => {
  it('names the person or the policy that decided', () => {
    expect(decisionText({ decision: 'approved', decided_by: 'person:alice (web, operator session)' })).toBe(
      'approved by person:alice (web, operator session)',
    );
    expect(decisionText({ decision: null, decided_by: 'policy (approval: none)' })).toBe(
      'allowed by policy (approval: none)',
    );
    expect(decisionText({ decision: null, decided_by: null })).toBeNull();
  });

  it('says an expiry was nobody’s decision once, not "expired by nobody (expired)"', () => {
    expect(decisionText({ decision: 'expired', decided_by: 'nobody (expired)' })).toBe('expired: nobody decided');
    expect(decisionText({ decision: 'expired', decided_by: null })).toBe('expired: nobody decided');
  });
});
