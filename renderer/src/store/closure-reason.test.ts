import { describe, expect, it } from 'vitest';
import type { ActionState, ActivityEvent } from '../../../broker/contract/index.js';
import { closureReason } from './closure-reason.js';
import { shownAction } from './test-cards.js';
let seq = 0;
const event = (kind: ActivityEvent['kind'], summary = ''): ActivityEvent => ({
  seq: (seq += 1),
  at_ms: 0,
  kind,
  action_id: 'act_test00000001',
  session_id: 'ses_1',
  ticket: 7,
  lane: 'doc-7',
  outcome: null,
  code: null,
  summary,
  expires_at_ms: null,
});
const shown = (events: ActivityEvent[], state: Partial<ActionState> = {}) =>
  shownAction(state, [event('ACTION_ACCEPTED', 'http route:docs (approval per_call)'), event('CARD_SHOWN'), ...events]);

describe('closureReason', () => {
  it('when a person rejected it, says so with their reason', () => {
    expect(closureReason(shown([event('REJECTED', 'by person:ann: conflicts with #6')]))).toMatchObject({
      headline: 'rejected by a person',
      detail: 'conflicts with #6',
    });
  });

  it("when it expired, says expired (never a person's denial)", () => {
    expect(closureReason(shown([event('EXPIRED')]))?.headline).toBe('expired');
  });

  it('when the agent cancelled it, says cancelled by the agent', () => {
    const reason = closureReason(
      shown([
        event('APPROVED', 'by person:ann'),
        event('CALLER_CANCELLED'),
        event('CANCELLED', 'by agent:ses_1: caller cancelled'),
      ]),
    );
    expect(reason).toMatchObject({ headline: 'cancelled by the agent', detail: 'caller cancelled' });
  });

  it('when its session ended, says session ended', () => {
    expect(closureReason(shown([event('CANCELLED', 'by broker:session-sweeper: session ended')]))?.headline).toBe(
      'session ended',
    );
  });

  it('when its session was revoked, says so', () => {
    expect(closureReason(shown([event('CANCELLED', 'by broker:session: session revoked')]))?.headline).toBe(
      'session revoked',
    );
  });

  it('when a person abandoned an unknown head, keeps the outcome unknown in the words', () => {
    const reason = closureReason(
      shown(
        [event('DISPATCH_STARTED'), event('OUTCOME_RECORDED'), event('ABANDONED', 'by person:ann: checked by hand')],
        { outcome: 'unknown' },
      ),
    );
    expect(reason).toMatchObject({
      headline: 'abandoned by a person',
      detail: 'checked by hand (the outcome stays unknown)',
    });
  });

  it('when it was sent and settled, gives the recorded outcome', () => {
    const reason = closureReason(
      shown([event('APPROVED', 'by person:ann'), event('DISPATCH_STARTED'), event('RESULT_COMMITTED')], {
        outcome: 'committed',
        outcome_basis: 'http_2xx',
        stage: 'result_committed',
      }),
    );
    expect(reason).toMatchObject({ headline: 'committed', detail: 'http_2xx' });
  });

  it('when it was sent and no outcome is recorded yet, says dispatched', () => {
    expect(closureReason(shown([event('DISPATCH_STARTED')]))?.headline).toBe('dispatched');
  });

  it('when nothing closed it yet, there is no reason (it is read again later)', () => {
    expect(closureReason(shown([event('APPROVED', 'by person:ann')]))).toBeNull();
  });
});
