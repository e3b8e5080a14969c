import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CodedError } from '../contract/index.js';
import type { DispatchGate } from '../ports/index.js';
import { openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { waitForCardCount } from '../testing/queue-waits.js';

let f: QueueFixture;
beforeEach(async () => {
  f = await openQueueFixture();
});
afterEach(async () => {
  await f.dispose();
});

const unavailable = () =>
  new CodedError('JOURNAL_UNAVAILABLE', 'the journal failed to make a record durable; dispatching stopped');

describe('when the journal fails at or after the dispatch boundary', () => {
  it('DISPATCH_STARTED may have become durable (the commit reported failure): the agent hears unknown, never not_attempted', async () => {
    const journal = f.h.temp.journal;
    const gate: DispatchGate = {
      beginDispatch: async (id, attempt, c) => {
        await journal.beginDispatch(id, attempt, c);
        throw unavailable();
      },
      append: (e) => journal.append(e),
    };
    f.h.channel = f.h.newChannel({ gate });
    const { envelope } = await f.submit('A', { route: 'plain' });
    expect(envelope.error).toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
    });
    expect(envelope.effect).toBe('unknown_effect');
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('an observation after dispatch fails: unknown with JOURNAL_UNAVAILABLE, not a thrown error', async () => {
    const journal = f.h.temp.journal;
    const gate: DispatchGate = {
      beginDispatch: (id, attempt, c) => journal.beginDispatch(id, attempt, c),
      append: () => Promise.reject(unavailable()),
    };
    f.h.channel = f.h.newChannel({ gate });
    const { envelope } = await f.submit('A', { route: 'plain' });
    expect(envelope.error).toMatchObject({ code: 'JOURNAL_UNAVAILABLE', outcome: 'unknown', retry: 'reconcile' });
    expect(envelope.evidence.dispatch_started).toBe(true);
  });

  it('a CANCELLED that won the race just before DISPATCH_STARTED: the cancelled envelope, nothing sent', async () => {
    const journal = f.h.temp.journal;
    const gate: DispatchGate = {
      beginDispatch: async (id, attempt, c) => {
        const ticket = journal.getAction(id)?.ticket ?? 0;
        await f.queue.cancel(ticket, person, 'changed my mind');
        return journal.beginDispatch(id, attempt, c);
      },
      append: (e) => journal.append(e),
    };
    f.h.channel = f.h.newChannel({ gate });
    const run = f.submit('A');
    const [card] = await waitForCardCount(f.queue, 1);
    await f.queue.approve(card?.ticket ?? 0, person);
    const { envelope } = await run;
    expect(envelope.error).toMatchObject({
      code: 'APPROVAL_DENIED',
      outcome: 'not_attempted',
      phase: 'credential_injection',
    });
    expect(envelope.evidence.dispatch_started).toBe(false);
    expect(f.server.arrivals).toHaveLength(0);
    expect(f.events(envelope.invocation_id).map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
  });
});

describe('when a person cancels right after approving, before CREDENTIAL_AUTHORIZED is written', () => {
  it('the executor answers the recorded cancellation (not IMPOSSIBLE_TRANSITION) and nothing is sent', async () => {
    const journal = f.h.temp.journal;
    const run = f.submit('A');
    const [card] = await waitForCardCount(f.queue, 1);
    const actionId = card?.action_id ?? '';
    let cancelled: Promise<unknown> | undefined;
    // The listener runs inside the approval's release, before the executor resumes.
    const stop = f.queue.onChange(() => {
      if (cancelled !== undefined || journal.getAction(actionId)?.decision !== 'approved') return;
      cancelled = f.queue.cancel(card?.ticket ?? 0, person, 'changed my mind');
    });
    await f.queue.approve(card?.ticket ?? 0, person);
    const { envelope } = await run;
    stop();
    await cancelled;
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(envelope.evidence.dispatch_started).toBe(false);
    expect(journal.getAction(actionId)).toMatchObject({
      decision: 'cancelled',
      dispatch_seq: null,
      outcome: 'not_attempted',
    });
    expect(f.events(actionId).map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
    expect(f.server.arrivals).toHaveLength(0);
    // The lane moved on: a later write to the same document goes through.
    const next = await f.submit('B', { route: 'plain' });
    expect(next.envelope.error).toBeUndefined();
    expect(f.server.markers()).toEqual(['B']);
  });
});
