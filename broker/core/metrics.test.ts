import { describe, expect, it } from 'vitest';
import { foldMetrics } from './metrics.js';

describe('foldMetrics', () => {
  it('counts phase × outcome pairs and codes separately, open actions apart, never one failure number', () => {
    const m = foldMetrics([
      { phase: 'remote_execution', outcome: 'unknown', code: 'REMOTE_OUTCOME_UNKNOWN', n: 2 },
      { phase: 'connection_setup', outcome: 'not_attempted', code: 'CONNECT_REFUSED', n: 3 },
      { phase: 'remote_execution', outcome: 'committed', code: null, n: 10 },
      { phase: 'remote_execution', outcome: 'committed', code: 'REMOTE_ERROR_STATUS', n: 1 },
      { phase: 'validation', outcome: 'not_attempted', code: 'INVALID_ARGUMENT', n: 3 },
      { phase: null, outcome: null, code: null, n: 4 },
    ]);
    expect(m.by_phase_outcome).toEqual([
      { phase: 'validation', outcome: 'not_attempted', count: 3 },
      { phase: 'connection_setup', outcome: 'not_attempted', count: 3 },
      { phase: 'remote_execution', outcome: 'committed', count: 11 },
      { phase: 'remote_execution', outcome: 'unknown', count: 2 },
    ]);
    expect(m.by_code).toEqual([
      { code: 'CONNECT_REFUSED', count: 3 },
      { code: 'INVALID_ARGUMENT', count: 3 },
      { code: 'REMOTE_OUTCOME_UNKNOWN', count: 2 },
      { code: 'REMOTE_ERROR_STATUS', count: 1 },
    ]);
    expect(m).toMatchObject({ open: 4, total: 23 });
    expect(Object.keys(m)).not.toContain('failures');
  });

  it('is empty for an empty journal', () => {
    expect(foldMetrics([])).toEqual({ by_phase_outcome: [], by_code: [], open: 0, total: 0 });
  });
});
