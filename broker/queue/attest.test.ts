import { afterEach, describe, expect, it } from 'vitest';
import { foldMetrics } from '../core/index.js';
import type { ApprovalCard } from '../contract/index.js';
import { openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { codedRefusal, waitForCards } from '../testing/queue-waits.js';

/**
 * A person settles an unknown head with a written basis (issue 7's operator attestation): the
 * outcome becomes what they attest, recorded as operator_attested, and the lane moves on. It can
 * never say not_attempted, never touch an in-flight or settled action, and never runs anything.
 */
let f: QueueFixture;
afterEach(async () => {
  await f.dispose();
});

async function cardOf(marker: string): Promise<ApprovalCard> {
  const match = (c: ApprovalCard) => c.body_preview?.includes(`"${marker}"`) === true;
  return (await waitForCards(f.queue, (cs) => cs.some(match), `the card of ${marker}`)).find(match) as ApprovalCard;
}

describe('when a person attests the outcome of an unknown head', () => {
  it('settles it as operator_attested, releases the lane, and sends nothing itself', async () => {
    f = await openQueueFixture({
      server: { behave: ({ marker }) => (marker === 'A' ? 'apply_then_drop' : 'respond') },
    });
    const a = f.submit('A');
    await f.queue.approve((await cardOf('A')).ticket, person);
    const ra = await a;
    const idA = ra.envelope.invocation_id;
    expect(ra.envelope.error).toMatchObject({ outcome: 'unknown' });
    const b = f.submit('B');
    const cardB = await cardOf('B');
    await f.queue.approve(cardB.ticket, person);
    expect(f.queue.position(cardB.action_id)).toMatchObject({ waiting: 'lane_blocked' });

    expect(await codedRefusal(f.queue.attest(idA, person, 'committed', 'no_effect', 'x'))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'effect',
    });
    expect(await codedRefusal(f.queue.attest(cardB.action_id, person, 'committed', 'succeeded', 'x'))).toMatchObject({
      code: 'DECISION_CONFLICT',
      message: expect.stringContaining('never dispatched'),
    });
    expect(await codedRefusal(f.queue.attest('act_nosuchaction', person, 'committed', 'succeeded', 'x'))).toMatchObject(
      { code: 'NOT_FOUND' },
    );

    const result = await f.queue.attest(
      idA,
      person,
      'committed',
      'succeeded',
      'the document shows the change; checked in the admin UI',
    );
    expect(result).toMatchObject({ action_id: idA, decision: 'attested committed' });
    expect(f.h.temp.journal.getAction(idA)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      source: 'operator_attested',
      outcome_basis: 'operator_attested',
      retry: 'never',
      abandoned: false,
    });
    const attested = f.events(idA).at(-1);
    expect(attested).toMatchObject({
      kind: 'OPERATOR_ATTESTED',
      payload: { actor: person, basis: 'the document shows the change; checked in the admin UI' },
    });

    // The lane moves on: B is sent; the attestation itself sent nothing (A arrived once).
    await b;
    expect(f.server.markers()).toEqual(['A', 'B']);
    // Settled now: a second attestation is refused and changes nothing.
    expect(await codedRefusal(f.queue.attest(idA, person, 'rejected', 'no_effect', 'changed my mind'))).toMatchObject({
      code: 'DECISION_CONFLICT',
      message: expect.stringContaining('already settled'),
    });
    // Metrics count it under its phase and outcome, not as a failure.
    const m = foldMetrics(f.h.temp.journal.outcomeCounts());
    expect(m.by_phase_outcome).toEqual(
      expect.arrayContaining([{ phase: 'remote_execution', outcome: 'committed', count: 2 }]),
    );
    expect(m.by_phase_outcome.some((p) => p.outcome === 'unknown')).toBe(false);
  });
});
