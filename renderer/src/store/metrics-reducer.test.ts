import { describe, expect, it } from 'vitest';
import { barPercent, metricsReducer, initialMetricsView, phaseOutcomeGrid } from './metrics-reducer.js';

describe('the phase × outcome grid', () => {
  it('has every phase and outcome, zero where no action is, and keeps the pairs apart', () => {
    const grid = phaseOutcomeGrid([
      { phase: 'connection_setup', outcome: 'not_attempted', count: 3 },
      { phase: 'remote_execution', outcome: 'unknown', count: 7 },
      { phase: 'remote_execution', outcome: 'committed', count: 40 },
    ]);
    expect(grid.phases).toEqual(['validation', 'credential_injection', 'connection_setup', 'remote_execution', 'result_delivery']);
    expect(grid.outcomes).toEqual(['not_attempted', 'rejected', 'committed', 'unknown']);
    expect(grid.count.connection_setup.not_attempted).toBe(3);
    expect(grid.count.remote_execution.unknown).toBe(7);
    expect(grid.count.remote_execution.not_attempted).toBe(0);
    expect(grid.max).toBe(40);
    expect(grid.settled).toBe(50);
  });

  it('scales bars to the largest cell, and never hides a non-zero count', () => {
    expect(barPercent(40, 40)).toBe(100);
    expect(barPercent(0, 40)).toBe(0);
    expect(barPercent(1, 100_000)).toBe(2);
    expect(phaseOutcomeGrid([]).max).toBe(1);
  });

  it('keeps the last metrics beside a refresh error', () => {
    const value = { by_phase_outcome: [], by_code: [], open: 1, total: 1 };
    const ready = metricsReducer(initialMetricsView, { type: 'received', reply: { ok: true, value } });
    const failed = metricsReducer(ready, { type: 'received', reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'x' } } });
    expect(failed).toMatchObject({ phase: 'error', metrics: value, error: { code: 'BROKER_UNREACHABLE' } });
  });
});
