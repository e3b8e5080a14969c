import { describe, expect, it } from 'vitest';
import {
  barPercent,
  decisionRows,
  metricsReducer,
  initialMetricsView,
  phaseOutcomeGrid,
  rateLines,
  sparklinePoints,
  type Metrics,
} from './metrics-reducer.js';

describe('the phase × outcome grid', () => {
  it('has every phase and outcome, zero where no action is, and keeps the pairs apart', () => {
    const grid = phaseOutcomeGrid([
      { phase: 'connection_setup', outcome: 'not_attempted', count: 3 },
      { phase: 'remote_execution', outcome: 'unknown', count: 7 },
      { phase: 'remote_execution', outcome: 'committed', count: 40 },
    ]);
    expect(grid.phases).toEqual([
      'validation',
      'credential_injection',
      'connection_setup',
      'remote_execution',
      'result_delivery',
    ]);
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
    const value: Metrics = {
      by_phase_outcome: [],
      by_code: [],
      decisions: [],
      open: 1,
      total: 1,
      rate: { until_ms: null, bucket_ms: 60_000, by_outcome: [], by_decision: [] },
    };
    const ready = metricsReducer(initialMetricsView, { type: 'received', reply: { ok: true, value } });
    const failed = metricsReducer(ready, {
      type: 'received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'x' } },
    });
    expect(failed).toMatchObject({ phase: 'error', metrics: value, error: { code: 'BROKER_UNREACHABLE' } });
  });
});

describe('the decisions and the rate', () => {
  it('lists every closing decision in a fixed order, 0 where none, apart from the phase grid', () => {
    expect(decisionRows([{ decision: 'rejected', count: 2 }])).toEqual([
      { decision: 'rejected', count: 2 },
      { decision: 'expired', count: 0 },
      { decision: 'cancelled', count: 0 },
      { decision: 'withdrawn', count: 0 },
      { decision: 'restarted', count: 0 },
    ]);
  });

  it('gives one sparkline per outcome, then per decision, each with its total', () => {
    const lines = rateLines({
      until_ms: 120_000,
      bucket_ms: 60_000,
      by_outcome: [
        { outcome: 'unknown', counts: [0, 1] },
        { outcome: 'committed', counts: [2, 3] },
      ],
      by_decision: [{ decision: 'rejected', counts: [1, 0] }],
    });
    expect(lines.map((l) => [l.key, l.total])).toEqual([
      ['outcome-committed', 5],
      ['outcome-unknown', 1],
      ['decision-rejected', 1],
    ]);
  });

  it('draws a sparkline scaled to its own peak, zero on the bottom edge', () => {
    expect(sparklinePoints([0, 2, 1], 100, 20)).toBe('0,20 50,0 100,10');
    expect(sparklinePoints([0, 0], 10, 20)).toBe('0,20 10,20');
    expect(sparklinePoints([], 10, 20)).toBe('');
    expect(sparklinePoints([4], 10, 20)).toBe('0,0');
  });
});
