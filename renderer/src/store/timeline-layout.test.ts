import { describe, expect, it } from 'vitest';
import { rowOf, t0 } from './action-list-row.test-support.js';
import { axisTicks, laneBlockedBy, laneWaitOf, segmentsOf, timelineOf } from './timeline-layout.js';

const s = (ms: number) => ms * 1_000;

describe('the timeline', () => {
  describe('segments of one action', () => {
    it('splits a settled action into waiting for a decision, waiting in its lane and in flight', () => {
      const row = rowOf(1, {
        accepted_at_ms: t0,
        decided_at_ms: t0 + s(5),
        dispatched_at_ms: t0 + s(46),
        settled_at_ms: t0 + s(48),
      });
      expect(segmentsOf(row, t0 + s(100))).toEqual([
        { kind: 'decision', startMs: t0, endMs: t0 + s(5) },
        { kind: 'lane', startMs: t0 + s(5), endMs: t0 + s(46) },
        { kind: 'flight', startMs: t0 + s(46), endMs: t0 + s(48) },
      ]);
    });

    it("runs an open action's current phase to now", () => {
      const waiting = rowOf(1, {
        accepted_at_ms: t0,
        decision: null,
        decided_at_ms: null,
        dispatched_at_ms: null,
        settled_at_ms: null,
        outcome: null,
      });
      expect(segmentsOf(waiting, t0 + s(7))).toEqual([{ kind: 'decision', startMs: t0, endMs: t0 + s(7) }]);
      const inLane = { ...waiting, decision: 'approved' as const, decided_at_ms: t0 + s(2) };
      expect(segmentsOf(inLane, t0 + s(7)).map((g) => [g.kind, g.endMs - g.startMs])).toEqual([
        ['decision', s(2)],
        ['lane', s(5)],
      ]);
      const flying = { ...inLane, dispatched_at_ms: t0 + s(3) };
      expect(segmentsOf(flying, t0 + s(7)).at(-1)).toEqual({ kind: 'flight', startMs: t0 + s(3), endMs: t0 + s(7) });
    });

    it('gives a rejected or expired action only its wait for a decision, and leaves empty phases out', () => {
      const rejected = rowOf(1, {
        accepted_at_ms: t0,
        decision: 'rejected',
        decided_at_ms: t0 + s(9),
        dispatched_at_ms: null,
        settled_at_ms: t0 + s(9),
        outcome: 'not_attempted',
      });
      expect(segmentsOf(rejected, t0 + s(60))).toEqual([{ kind: 'decision', startMs: t0, endMs: t0 + s(9) }]);
      // No approval needed: decided the moment it was accepted, so no decision segment at all.
      const policy = rowOf(2, { accepted_at_ms: t0, decided_at_ms: t0, dispatched_at_ms: t0, settled_at_ms: t0 + 300 });
      expect(segmentsOf(policy, t0 + s(60))).toEqual([{ kind: 'flight', startMs: t0, endMs: t0 + 300 }]);
    });
  });

  describe('waits in a lane', () => {
    const head = rowOf(4, {
      accepted_at_ms: t0,
      decided_at_ms: t0 + s(1),
      dispatched_at_ms: t0 + s(2),
      settled_at_ms: t0 + s(45),
    });
    const next = rowOf(5, {
      accepted_at_ms: t0 + s(1),
      decided_at_ms: t0 + s(4),
      dispatched_at_ms: t0 + s(45),
      settled_at_ms: t0 + s(46),
    });

    it('says which earlier ticket an approved action waited for, and how long', () => {
      expect(laneWaitOf(next, [head, next], t0 + s(100))).toEqual({ ticket: 4, waited_ms: s(41), ongoing: false });
      expect(laneWaitOf(head, [head, next], t0 + s(100))).toBeNull();
      const bar = timelineOf([head, next], 'lane', t0 + s(100)).groups[0]?.bars.find((b) => b.ticket === 5);
      expect(bar?.title).toMatch(
        /^#5 approved by person:alice \(web, operator session\), waited 41 s for #4 · docs POST \/docs\/5/,
      );
    });

    it('says a call policy allowed at admission was allowed by policy (as `postern actions list` does), not undecided', () => {
      // approval: none — no decision event, so decision stays null; the row names the policy (and its rule) as decider.
      const allowed = rowOf(6, {
        decision: null,
        decided_by: 'policy (approval: none; rules[0]: GET HEAD /** → none)',
      });
      const bar = timelineOf([allowed], 'lane', t0 + s(100)).groups[0]?.bars[0];
      expect(bar?.title).toMatch(
        /^#6 allowed by policy \(approval: none; rules\[0\]: GET HEAD \/\*\* → none\) · docs POST/,
      );
      const waiting = rowOf(7, { decision: null, decided_by: null, decided_at_ms: null, settled_at_ms: null });
      expect(timelineOf([waiting], 'lane', t0 + s(100)).groups[0]?.bars[0]?.title).toMatch(/^#7 not decided yet · /);
    });

    it('colours a bar by its effect: a committed HTTP 500 is drawn as failed, not as a success', () => {
      const ok = rowOf(8);
      const failed = rowOf(9, { effect: 'failed', code: 'REMOTE_ERROR_STATUS', lane: 'other' });
      const bars = timelineOf([ok, failed], 'lane', t0 + s(100)).groups.flatMap((g) => g.bars);
      expect(bars.map((b) => [b.ticket, b.tone])).toEqual(
        expect.arrayContaining([
          [8, 'succeeded'],
          [9, 'failed'],
        ]),
      );
      expect(bars.find((b) => b.ticket === 9)?.title).toMatch(/ · committed · failed \(REMOTE_ERROR_STATUS\)$/);
    });

    it('says an ongoing wait, and shows the lane as blocked while it lasts', () => {
      // #4 open before its dispatch (approved, its credential being authorized): #5 waits for it.
      const open = { ...head, dispatched_at_ms: null, settled_at_ms: null, outcome: null, effect: null };
      const waiting = { ...next, dispatched_at_ms: null, settled_at_ms: null, outcome: null, effect: null };
      expect(laneWaitOf(waiting, [open, waiting], t0 + s(16))).toEqual({ ticket: 4, waited_ms: s(12), ongoing: true });
      expect(laneBlockedBy([open, waiting], t0 + s(16))).toBe('blocked: #5 waiting for #4 for 12 s');
      // #4 dispatched and still running (no outcome yet): the lane is blocked by it running.
      const running = { ...open, dispatched_at_ms: head.dispatched_at_ms, stage: 'request_sent' as const };
      expect(laneBlockedBy([running, waiting], t0 + s(16))).toBe('blocked: #4 is running (request sent)');
      expect(laneBlockedBy([head, next], t0 + s(100))).toBeNull();
    });

    it('shows a lane blocked by an unknown outcome until a later action of the lane is dispatched', () => {
      const unknown = { ...head, outcome: 'unknown' as const };
      expect(laneBlockedBy([unknown], t0 + s(100))).toBe("blocked: #4's outcome is unknown");
      expect(
        laneBlockedBy([unknown, { ...next, dispatched_at_ms: t0 + s(50), settled_at_ms: t0 + s(51) }], t0 + s(100)),
      ).toBeNull();
    });

    it('says a dispatched head still running is running (its stage), not an unknown outcome, until it settles', () => {
      // Dispatched, nothing settled it: the list's row has no outcome (nor effect) yet.
      const running = { ...head, outcome: null, effect: null, settled_at_ms: null, stage: 'response_started' as const };
      expect(laneBlockedBy([running], t0 + s(100))).toBe('blocked: #4 is running (response started)');
      const bar = timelineOf([running], 'lane', t0 + s(100)).groups[0]?.bars[0];
      expect(bar).toMatchObject({ open: true, outcome: null });
      expect(bar?.title).toMatch(/ · open$/);
    });
  });

  describe('the picture', () => {
    it('groups by session or by lane, stacks overlapping bars, and spans the axis from the first acceptance to now', () => {
      const a = rowOf(1, { session_id: 'ses_a', lane: 'l1', accepted_at_ms: t0, settled_at_ms: t0 + s(10) });
      const b = rowOf(2, { session_id: 'ses_a', lane: 'l2', accepted_at_ms: t0 + s(5), settled_at_ms: t0 + s(8) });
      const c = rowOf(3, {
        session_id: 'ses_b',
        lane: 'l1',
        accepted_at_ms: t0 + s(11),
        settled_at_ms: null,
        outcome: null,
        dispatched_at_ms: null,
      });
      const bySession = timelineOf([a, b, c], 'session', t0 + s(20));
      expect(bySession.groups.map((g) => [g.key, g.tracks, g.bars.length])).toEqual([
        ['ses_b', 1, 1],
        ['ses_a', 2, 2],
      ]);
      expect(bySession.groups[1]?.label).toBe('ses_a — claude (pid 4242)');
      const unnamed = timelineOf([{ ...a, agent: { name: null, pid: null } }], 'session', t0 + s(20));
      expect(unnamed.groups[0]?.label).toBe('ses_a');
      expect(bySession).toMatchObject({ startMs: t0, endMs: t0 + s(20) });
      expect(bySession.groups[0]?.bars[0]).toMatchObject({ open: true, endMs: t0 + s(20) });
      const byLane = timelineOf([a, b, c], 'lane', t0 + s(20));
      expect(byLane.groups.map((g) => [g.label, g.tracks])).toEqual([
        ['lane l1', 1],
        ['lane l2', 1],
      ]);
      expect(byLane.groups[0]?.bars.map((bar) => bar.ticket)).toEqual([1, 3]);
    });

    it('is empty with nothing loaded, and spaces its ticks evenly', () => {
      expect(timelineOf([], 'lane', t0)).toEqual({ startMs: t0, endMs: t0, groups: [] });
      expect(axisTicks(0, 1_000, 5)).toEqual([0, 250, 500, 750, 1_000]);
      expect(axisTicks(5, 5)).toEqual([5]);
    });
  });
});
