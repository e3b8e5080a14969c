import { describe, expect, it } from 'vitest';
import { closedBeforeDispatch, foldMetrics, rateBuckets } from './metrics.js';

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
    expect(m).toMatchObject({ open: 4, total: 23, decisions: [] });
    expect(Object.keys(m)).not.toContain('failures');
  });

  it('counts a dispatched action not settled yet as open, never under its pair or code', () => {
    const unknown = { phase: 'remote_execution', outcome: 'unknown', code: 'OPERATION_TIMEOUT', dispatched: 1 };
    const m = foldMetrics([
      { ...unknown, minute: 1_000, n: 1 },
      { ...unknown, code: null, minute: null, n: 1, in_flight: 1 },
      { ...unknown, minute: null, n: 1, in_flight: 1 },
    ]);
    expect(m).toMatchObject({ open: 2, total: 3 });
    expect(m.by_phase_outcome).toEqual([{ phase: 'remote_execution', outcome: 'unknown', count: 1 }]);
    expect(m.by_code).toEqual([{ code: 'OPERATION_TIMEOUT', count: 1 }]);
    // Only in flight: the pair and the code are not listed at all.
    const running = foldMetrics([{ ...unknown, minute: null, n: 1, in_flight: 1 }]);
    expect(running).toMatchObject({ open: 1, total: 1, by_phase_outcome: [], by_code: [] });
  });

  it('is empty for an empty journal', () => {
    expect(foldMetrics([])).toEqual({
      by_phase_outcome: [],
      by_code: [],
      decisions: [],
      open: 0,
      total: 0,
      rate: { until_ms: null, bucket_ms: 60_000, by_outcome: [], by_decision: [] },
    });
  });

  describe('when a person rejected, an approval expired, a ticket was cancelled or the caller withdrew before dispatch', () => {
    const rows = [
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'APPROVAL_DENIED',
        decision: 'rejected',
        dispatched: 0,
        minute: null,
        n: 2,
      },
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'APPROVAL_EXPIRED',
        decision: 'expired',
        dispatched: 0,
        minute: null,
        n: 1,
      },
      // A session revoked (or ended) and a person's cancel: cancelled.
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'SESSION_REVOKED',
        decision: 'cancelled',
        dispatched: 0,
        minute: null,
        n: 3,
      },
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'APPROVAL_DENIED',
        decision: 'cancelled',
        dispatched: 0,
        minute: null,
        n: 1,
      },
      // The caller's own stop: the queue writes CANCELLED for it too (decision cancelled), with the caller's code.
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'CALLER_CANCELLED',
        decision: 'cancelled',
        dispatched: 0,
        minute: null,
        n: 5,
      },
      // A real gate failure in the same phase stays a failure of that phase.
      {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        code: 'VAULT_LOCKED',
        decision: 'approved',
        dispatched: 0,
        minute: null,
        n: 6,
      },
    ];

    it('counts each as a decision, never as a credential_injection failure nor under codes', () => {
      const m = foldMetrics(rows);
      expect(m.decisions).toEqual([
        { decision: 'rejected', count: 2 },
        { decision: 'expired', count: 1 },
        { decision: 'cancelled', count: 4 },
        { decision: 'withdrawn', count: 5 },
      ]);
      expect(m.by_phase_outcome).toEqual([{ phase: 'credential_injection', outcome: 'not_attempted', count: 6 }]);
      expect(m.by_code).toEqual([{ code: 'VAULT_LOCKED', count: 6 }]);
      expect(m.total).toBe(18);
    });

    it('treats a rejection as a decision even from a row without the dispatch column', () => {
      expect(
        closedBeforeDispatch({
          phase: 'credential_injection',
          outcome: 'not_attempted',
          code: 'APPROVAL_DENIED',
          decision: 'rejected',
          n: 1,
        }),
      ).toBe('rejected');
      // Without the dispatch column a caller code cannot be placed before dispatch: it stays where it was.
      expect(
        closedBeforeDispatch({
          phase: 'credential_injection',
          outcome: 'not_attempted',
          code: 'CALLER_CANCELLED',
          n: 1,
        }),
      ).toBeNull();
      // A cancelled ticket is undispatched by itself: the caller's own cancel is withdrawn without the column too.
      expect(
        closedBeforeDispatch({
          phase: 'credential_injection',
          outcome: 'not_attempted',
          code: 'CALLER_CANCELLED',
          decision: 'cancelled',
          n: 1,
        }),
      ).toBe('withdrawn');
      // The broker's close for a caller whose process is gone (the session sweeper) is the caller's withdrawal too;
      // a revocation stays a person's cancel.
      const sessionClosed = { phase: 'credential_injection', outcome: 'not_attempted', decision: 'cancelled', n: 1 };
      expect(closedBeforeDispatch({ ...sessionClosed, code: 'SESSION_ENDED', dispatched: 0 })).toBe('withdrawn');
      expect(closedBeforeDispatch({ ...sessionClosed, code: 'SESSION_REVOKED', dispatched: 0 })).toBe('cancelled');
      expect(
        closedBeforeDispatch({
          phase: 'remote_execution',
          outcome: 'committed',
          code: null,
          decision: 'approved',
          dispatched: 1,
          n: 1,
        }),
      ).toBeNull();
    });
  });

  describe('the rate over time', () => {
    it('buckets per minute up to the newest classified action, one series per outcome and per decision', () => {
      const newest = 28_000_000; // a minute number (at_ms / 60 000)
      const m = foldMetrics([
        {
          phase: 'remote_execution',
          outcome: 'committed',
          code: null,
          decision: null,
          dispatched: 1,
          minute: newest,
          n: 3,
        },
        {
          phase: 'remote_execution',
          outcome: 'committed',
          code: null,
          decision: null,
          dispatched: 1,
          minute: newest - 59,
          n: 2,
        },
        {
          phase: 'remote_execution',
          outcome: 'unknown',
          code: 'REMOTE_OUTCOME_UNKNOWN',
          decision: 'approved',
          dispatched: 1,
          minute: newest - 10,
          n: 1,
        },
        {
          phase: 'credential_injection',
          outcome: 'not_attempted',
          code: 'APPROVAL_DENIED',
          decision: 'rejected',
          dispatched: 0,
          minute: newest - 1,
          n: 1,
        },
        // Outside the window (the journal sends null there; a stray older minute is ignored too).
        {
          phase: 'remote_execution',
          outcome: 'committed',
          code: null,
          decision: null,
          dispatched: 1,
          minute: null,
          n: 50,
        },
        {
          phase: 'remote_execution',
          outcome: 'committed',
          code: null,
          decision: null,
          dispatched: 1,
          minute: newest - 60,
          n: 7,
        },
        { phase: null, outcome: null, code: null, decision: null, dispatched: 0, minute: null, n: 1 },
      ]);
      expect(m.rate.until_ms).toBe((newest + 1) * 60_000);
      expect(m.rate.by_outcome.map((s) => s.outcome)).toEqual(['committed', 'unknown']);
      const committed = m.rate.by_outcome[0]?.counts ?? [];
      expect(committed).toHaveLength(rateBuckets);
      expect(committed[rateBuckets - 1]).toBe(3);
      expect(committed[0]).toBe(2);
      expect(committed.reduce((a, b) => a + b, 0)).toBe(5);
      expect(m.rate.by_outcome[1]?.counts[rateBuckets - 11]).toBe(1);
      // The rejection has its own series; no not_attempted series claims it.
      expect(m.rate.by_decision).toEqual([{ decision: 'rejected', counts: expect.any(Array) }]);
      expect(m.rate.by_decision[0]?.counts[rateBuckets - 2]).toBe(1);
    });

    it("ends the hour at a running action's minute (in_flight: 1) but counts it in no series: it is open", () => {
      const newest = 28_000_000;
      const key = { phase: 'remote_execution', code: null, decision: null, dispatched: 1 } as const;
      const m = foldMetrics([
        { ...key, outcome: 'committed', minute: newest - 30, n: 2 },
        { ...key, outcome: 'unknown', minute: newest, n: 1, in_flight: 1 },
      ]);
      expect(m.rate.until_ms).toBe((newest + 1) * 60_000);
      expect(m.rate.by_outcome).toEqual([{ outcome: 'committed', counts: expect.any(Array) }]);
      expect(m.rate.by_outcome[0]?.counts[rateBuckets - 31]).toBe(2);
      expect(m).toMatchObject({ open: 1, total: 3, by_phase_outcome: [{ outcome: 'committed', count: 2 }] });
    });
  });
});
