import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { approvalCardSchema, type ApprovalCard, type JournalEvent } from '../contract/index.js';
import { canary, canaryLeaks } from '../testing/http-action-harness.js';
import { approvalTtlSeconds, openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { codedRefusal, waitForCard, waitForCards } from '../testing/queue-waits.js';

let f: QueueFixture;
afterEach(async () => {
  await f.dispose();
});

const kinds = (events: JournalEvent[]) => events.map((e) => e.kind);

/** A refused decision's code and message (the field is asserted elsewhere). */
async function conflict(decision: Promise<unknown>): Promise<{ code: string; message: string }> {
  const { code, message } = await codedRefusal(decision);
  return { code, message };
}

/** The card whose body preview carries `marker` (the agent's own bytes), once it is visible. */
async function cardOf(marker: string, state?: ApprovalCard['state']): Promise<ApprovalCard> {
  const match = (c: ApprovalCard) =>
    c.body_preview?.includes(`"${marker}"`) === true && (state === undefined || c.state === state);
  const cards = await waitForCards(
    f.queue,
    (cs) => cs.some(match),
    `the card of ${marker}${state === undefined ? '' : ` (${state})`}`,
  );
  return cards.find(match) as ApprovalCard;
}

describe('when a per-call card is decided', () => {
  beforeEach(async () => {
    f = await openQueueFixture();
  });

  it('shows a card with the request before injection, then approval dispatches it', async () => {
    const run = f.submit('A');
    const card = await cardOf('A', 'pending');
    expect(approvalCardSchema.parse(card)).toEqual(card);
    expect(card).toMatchObject({
      approval: 'per_call',
      lane: 'document-7',
      target: 'route:docs',
      method: 'POST',
      path: '/documents/7',
      credential: 'docs-token',
      body_preview: '{"marker":"A"}',
      body_bytes: 14,
      text: 'waiting for approval',
      expires_at_ms: f.h.temp.clock.nowMs() + approvalTtlSeconds * 1000,
    });
    expect(f.server.arrivals).toHaveLength(0);
    await f.queue.approve(card.ticket, person);
    const { envelope, response } = await run;
    expect(envelope.error).toBeUndefined();
    expect(response?.status).toBe(200);
    expect(f.server.markers()).toEqual(['A']);
    expect(kinds(f.events(envelope.invocation_id)).slice(0, 5)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CARD_SHOWN',
      'APPROVED',
      'CREDENTIAL_AUTHORIZED',
    ]);
    expect(f.events(envelope.invocation_id).find((e) => e.kind === 'APPROVED')?.payload).toEqual({
      actor: person,
      request_fingerprint: envelope.evidence.request_fingerprint,
    });
    expect(f.queue.cards()).toEqual([]);
  });

  it('the card shows the query and the agent-set headers, so a person sees ?action=purge and a method override', async () => {
    const run = f.submit('Q', {
      query: { action: 'purge', confirm: 'yes' },
      headers: { 'X-HTTP-Method-Override': 'DELETE' },
    });
    const card = await cardOf('Q', 'pending');
    expect(approvalCardSchema.parse(card)).toEqual(card);
    expect(card.query).toEqual([
      ['action', 'purge'],
      ['confirm', 'yes'],
    ]);
    expect(card.headers).toEqual([
      ['content-type', 'application/json'],
      ['x-http-method-override', 'DELETE'],
    ]);
    // The injected credential is never on a card.
    expect(JSON.stringify(card)).not.toContain(canary);
    // The live card shows what ACTION_ACCEPTED sealed (one view, built at admission): a card rebuilt from the journal
    // after a restart shows the same request.
    const accepted = f.events(card.action_id).find((e) => e.kind === 'ACTION_ACCEPTED');
    expect(accepted?.kind === 'ACTION_ACCEPTED' ? accepted.payload.request_view : undefined).toEqual({
      query: card.query,
      headers: card.headers,
      body_bytes: card.body_bytes,
    });
    await f.queue.reject(card.ticket, person, 'not a purge');
    expect((await run).envelope.error?.code).toBe('APPROVAL_DENIED');
  });

  it('a rejection closes it (APPROVAL_DENIED, nothing sent); a late approval is a DECISION_CONFLICT', async () => {
    const run = f.submit('A');
    const card = await cardOf('A');
    await f.queue.reject(card.ticket, person, 'wrong document');
    const { envelope } = await run;
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted', retry: 'never' });
    expect(await conflict(f.queue.approve(card.ticket, person))).toEqual({
      code: 'DECISION_CONFLICT',
      message: `ticket #${card.ticket} already rejected`,
    });
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('the window closing records EXPIRED once (never a denial); a late approval says "already expired"', async () => {
    const run = f.submit('A');
    const card = await cardOf('A');
    expect(f.timers.advance(approvalTtlSeconds * 1000 - 1)).toBe(0);
    expect(f.timers.advance(1)).toBe(1);
    const { envelope } = await run;
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_EXPIRED', outcome: 'not_attempted', retry: 'never' });
    expect(await conflict(f.queue.approve(card.ticket, person))).toEqual({
      code: 'DECISION_CONFLICT',
      message: `ticket #${card.ticket} already expired`,
    });
    expect(await conflict(f.queue.reject(card.ticket, person, 'late'))).toMatchObject({
      message: `ticket #${card.ticket} already expired`,
    });
    const decisions = kinds(f.events(envelope.invocation_id)).filter((k) =>
      ['APPROVED', 'REJECTED', 'EXPIRED', 'CANCELLED'].includes(k),
    );
    expect(decisions).toEqual(['EXPIRED']);
  });

  it('an unknown ticket is NOT_FOUND', async () => {
    expect(await conflict(f.queue.approve(999, person))).toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('when two conflicting writes share a lane (the race drill, in process)', () => {
  beforeEach(async () => {
    f = await openQueueFixture();
  });

  it('approving B first sends nothing; approving A then sends A, then B', async () => {
    const a = f.submit('A');
    const cardA = await cardOf('A');
    const b = f.submit('B');
    const cardB = await cardOf('B');
    expect(cardB.ticket).toBeGreaterThan(cardA.ticket);
    await f.queue.approve(cardB.ticket, person);
    expect(await cardOf('B', 'approved_waiting')).toMatchObject({
      text: `approved, waiting for #${cardA.ticket}`,
      waiting_for_ticket: cardA.ticket,
    });
    expect(f.queue.position((await cardOf('B')).action_id)).toMatchObject({
      waiting: 'lane',
      waiting_for_ticket: cardA.ticket,
    });
    expect(f.server.arrivals).toHaveLength(0);
    await f.queue.approve(cardA.ticket, person);
    const [ra, rb] = await Promise.all([a, b]);
    expect(f.server.markers()).toEqual(['A', 'B']);
    const dispatchSeq = (id: string) => f.events(id).find((e) => e.kind === 'DISPATCH_STARTED')?.seq ?? 0;
    expect(dispatchSeq(ra.envelope.invocation_id)).toBeLessThan(dispatchSeq(rb.envelope.invocation_id));
  });

  it('rejecting A releases the approved B; both tickets stay in the journal', async () => {
    const a = f.submit('A');
    const cardA = await cardOf('A');
    const b = f.submit('B');
    const cardB = await cardOf('B');
    await f.queue.approve(cardB.ticket, person);
    await f.queue.reject(cardA.ticket, person, 'user');
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.envelope.error?.code).toBe('APPROVAL_DENIED');
    expect(rb.envelope.error).toBeUndefined();
    expect(f.server.markers()).toEqual(['B']);
  });

  it('A expiring while B is approved: A expired once, B sent', async () => {
    const a = f.submit('A');
    const cardA = await cardOf('A');
    f.timers.advance(1_000);
    const b = f.submit('B');
    const cardB = await cardOf('B');
    await f.queue.approve(cardB.ticket, person);
    f.timers.advance(approvalTtlSeconds * 1000 - 1_000);
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.envelope.error?.code).toBe('APPROVAL_EXPIRED');
    expect(kinds(f.events(ra.envelope.invocation_id)).filter((k) => k === 'EXPIRED')).toHaveLength(1);
    expect(rb.envelope.error).toBeUndefined();
    expect(f.server.markers()).toEqual(['B']);
    expect(cardA.ticket).toBeLessThan(cardB.ticket);
  });

  it('cancelling the approved B before A resolves: B is never sent, even after A is approved', async () => {
    const a = f.submit('A');
    const cardA = await cardOf('A');
    const b = f.submit('B');
    const cardB = await cardOf('B');
    await f.queue.approve(cardB.ticket, person);
    await f.queue.cancel(cardB.ticket, person, 'not needed');
    const rb = await b;
    expect(rb.envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    await f.queue.approve(cardA.ticket, person);
    await a;
    expect(f.server.markers()).toEqual(['A']);
    expect(await conflict(f.queue.approve(cardB.ticket, person))).toMatchObject({
      message: `ticket #${cardB.ticket} already cancelled`,
    });
  });

  it('A unknown (effect applied, connection dropped): B waits LANE_BLOCKED until a person abandons A', async () => {
    await f.dispose();
    f = await openQueueFixture({
      server: { behave: ({ marker }) => (marker === 'A' ? 'apply_then_drop' : 'respond') },
    });
    const a = f.submit('A');
    await f.queue.approve((await cardOf('A')).ticket, person);
    const ra = await a;
    expect(ra.envelope.error).toMatchObject({ outcome: 'unknown' });
    const b = f.submit('B');
    const cardB = await cardOf('B');
    await f.queue.approve(cardB.ticket, person);
    const ticketA = f.ticketOf(ra);
    expect(f.queue.position(cardB.action_id)).toMatchObject({
      waiting: 'lane_blocked',
      waiting_for_ticket: ticketA,
      text: `approved, blocked by #${ticketA} (outcome unknown)`,
    });
    expect(f.queue.cards().find((c) => c.ticket === ticketA)).toMatchObject({
      state: 'blocked_head',
      waiting_for_ticket: null,
    });
    expect(f.server.markers()).toEqual(['A']);
    expect(await conflict(f.queue.abandon(cardB.ticket, person, 'wrong one'))).toMatchObject({
      code: 'DECISION_CONFLICT',
    });
    await f.queue.abandon(ticketA, person, 'checked the document by hand');
    await b;
    expect(f.server.markers()).toEqual(['A', 'B']);
    // Abandoning releases the lane only: A's outcome stays unknown.
    expect(f.h.temp.journal.getAction(ra.envelope.invocation_id)).toMatchObject({
      outcome: 'unknown',
      abandoned: true,
    });
  });

  it('an unrelated lane never waits: document-8 goes while document-7 waits for a person', async () => {
    const a = f.submit('A');
    await cardOf('A');
    const c = await f.submit('C', { route: 'plain', path: '/documents/8' });
    expect(c.envelope.error).toBeUndefined();
    expect(f.server.markers()).toEqual(['C']);
    // A read that bypasses lanes does not wait either.
    const read = await f.submit('R', { route: 'plain', method: 'GET', path: '/documents/7' });
    expect(read.envelope.error).toBeUndefined();
    await f.queue.reject((await cardOf('A')).ticket, person, 'done');
    await a;
  });

  it('approval-none writes of one lane are serialized in ticket order', async () => {
    const markers = ['1', '2', '3', '4', '5'];
    const results = await Promise.all(markers.map((m) => f.submit(m, { route: 'plain' })));
    const inTicketOrder = markers
      .map((m, i) => ({ m, ticket: f.ticketOf(results[i] as (typeof results)[number]) }))
      .sort((x, y) => x.ticket - y.ticket);
    expect(f.server.markers()).toEqual(inTicketOrder.map((x) => x.m));
    const dispatchSeq = (m: string) =>
      f
        .events((results[markers.indexOf(m)] as (typeof results)[number]).envelope.invocation_id)
        .find((e) => e.kind === 'DISPATCH_STARTED')?.seq ?? 0;
    const seqs = inTicketOrder.map((x) => dispatchSeq(x.m));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });
});

describe('when calls need their session approved', () => {
  beforeEach(async () => {
    f = await openQueueFixture();
  });

  async function startSession(pid: number): Promise<string> {
    const id = `ses_test${String(pid).padStart(8, '0')}`;
    await f.h.temp.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: id,
      payload: {
        pid,
        uid: 1000,
        start_time: String(pid * 10),
        ppid: 1,
        exe: '/usr/bin/agent',
        cwd: '/work',
        parent_exe: null,
        client_name: 'test-agent',
        client_version: '1',
      },
    });
    return id;
  }

  it('a pending session’s call waits (awaiting_session); approving the session approves it by policy and sends it', async () => {
    const sessionId = await startSession(4242);
    const run = f.submit('S', { route: 'sess', sessionId });
    const card = await cardOf('S', 'awaiting_session');
    expect(card.session).toMatchObject({
      session_id: sessionId,
      status: 'pending',
      pid: 4242,
      client_name: 'test-agent',
    });
    expect(card.text).toBe('waiting for session approval');
    expect(f.server.arrivals).toHaveLength(0);
    await f.queue.approveSession(sessionId, person);
    const { envelope } = await run;
    expect(envelope.error).toBeUndefined();
    expect(f.events(envelope.invocation_id).find((e) => e.kind === 'APPROVED')?.payload).toMatchObject({
      actor: { kind: 'policy', id: `session:${sessionId}` },
    });
    // Once approved, the next session-mode call goes without a card.
    const next = await f.submit('S2', { route: 'sess', sessionId });
    expect(kinds(f.events(next.envelope.invocation_id))).not.toContain('CARD_SHOWN');
    expect(await conflict(f.queue.approveSession(sessionId, person))).toMatchObject({
      code: 'DECISION_CONFLICT',
      message: `session ${sessionId} is already approved`,
    });
  });

  it('revoking the session cancels its undispatched tickets (SESSION_REVOKED) and refuses its later calls', async () => {
    const sessionId = await startSession(4343);
    const run = f.submit('S', { route: 'sess', sessionId });
    const perCall = f.submit('P', { route: 'docs', sessionId });
    await cardOf('S');
    await cardOf('P');
    await f.queue.revokeSession(sessionId, person, 'not my agent');
    const [rs, rp] = await Promise.all([run, perCall]);
    expect(rs.envelope.error).toMatchObject({ code: 'SESSION_REVOKED', outcome: 'not_attempted' });
    expect(rp.envelope.error).toMatchObject({ code: 'SESSION_REVOKED' });
    expect(f.events(rs.envelope.invocation_id).find((e) => e.kind === 'CANCELLED')?.payload).toMatchObject({
      reason: 'session revoked',
    });
    const later = await f.submit('L', { route: 'sess', sessionId });
    expect(later.envelope.error).toMatchObject({ code: 'SESSION_REVOKED' });
    // Even an approval-none call admitted after the revocation (a race at the socket) never runs.
    const none = await f.submit('N', { route: 'plain', sessionId });
    expect(none.envelope.error).toMatchObject({ code: 'SESSION_REVOKED', outcome: 'not_attempted' });
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('after session_grant_ttl_seconds the session’s calls need a per-call approval', async () => {
    await f.dispose();
    f = await openQueueFixture({ agentsYaml: '  session_grant_ttl_seconds: 60' });
    const sessionId = await startSession(4444);
    await f.queue.approveSession(sessionId, person);
    expect((await f.submit('in', { route: 'sess', sessionId })).envelope.error).toBeUndefined();
    f.timers.advance(60_000);
    const run = f.submit('out', { route: 'sess', sessionId });
    const card = await cardOf('out', 'pending');
    await f.queue.approve(card.ticket, person);
    expect((await run).envelope.error).toBeUndefined();
  });

  it('a reconnection does not renew the grant: an agent that opens a new connection before it runs out still meets cards', async () => {
    await f.dispose();
    f = await openQueueFixture({ agentsYaml: '  session_grant_ttl_seconds: 60' });
    const sessionId = await startSession(4445);
    await f.queue.approveSession(sessionId, person);
    f.timers.advance(50_000);
    await f.h.temp.journal.appendSession({
      kind: 'SESSION_RECONNECTED',
      action_id: sessionId,
      payload: { client_name: 'agent', client_version: '1' },
    });
    expect((await f.submit('in', { route: 'sess', sessionId })).envelope.error).toBeUndefined();
    // 60 s after the approval, 10 s after the reconnection.
    f.timers.advance(10_000);
    const run = f.submit('out', { route: 'sess', sessionId });
    const card = await cardOf('out', 'pending');
    expect(f.events(card.action_id).map((e) => e.kind)).not.toContain('APPROVED');
    await f.queue.reject(card.ticket, person, 'the grant ran out');
    expect((await run).envelope.error).toMatchObject({ code: 'APPROVAL_DENIED' });
    expect(f.server.markers()).toEqual(['in']);
  });
});

describe('what never leaves the vault', () => {
  it('the canary credential is in no card, answer, log line or journal file', async () => {
    f = await openQueueFixture();
    const run = f.submit('A');
    const card = await cardOf('A');
    const cards = JSON.stringify(f.queue.cards());
    await f.queue.approve(card.ticket, person);
    await run;
    expect(cards).not.toContain(canary);
    expect(cards).toContain('docs-token');
    expect(f.logLines.join('\n')).not.toContain(canary);
    expect(canaryLeaks(f.h)).toEqual([]);
    expect(f.server.arrivals[0]?.headerNames).toContain('authorization');
  });
});

/** Whether `run` settled by the time the queued callbacks ran (an executor still waiting for its turn has not). */
async function hasSettled(run: Promise<unknown>): Promise<boolean> {
  let settled = false;
  run.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('when the broker stops (holdReleases: the drain before the journal closes)', () => {
  it('a card a person approves after the hold is not released: nothing is sent and nothing counts as in flight', async () => {
    f = await openQueueFixture();
    const run = f.submit('A');
    const card = await cardOf('A', 'pending');
    f.queue.holdReleases();
    await f.queue.approve(card.ticket, person);
    expect(f.queue.releasedCount()).toBe(0);
    expect(f.h.temp.journal.getAction(card.action_id)).toMatchObject({ decision: 'approved', dispatch_seq: null });
    await expect(f.server.waitForArrivals(1, 200)).rejects.toThrow(/expected 1 arrivals/);
    expect(await hasSettled(run)).toBe(false);
  });

  it('one already released runs on and is counted until it settles; the ticket whose lane turn then comes stays unreleased', async () => {
    f = await openQueueFixture({ server: { behave: ({ marker }) => (marker === 'A' ? 'hold' : 'respond') } });
    const a = f.submit('A', { route: 'plain' });
    await f.server.waitForArrivals(1);
    const b = f.submit('B', { route: 'plain' });
    // B is admitted and waits for its turn behind A (the same lane, document-7).
    await vi.waitFor(() => expect(f.h.temp.journal.listActions({ fromTicket: 1, limit: 10 })).toHaveLength(2));
    expect(f.queue.releasedCount()).toBe(1);
    f.queue.holdReleases();
    expect(f.queue.releasedCount()).toBe(1);
    expect(f.server.releaseHeld()).toBe(1);
    const ra = await a;
    expect(ra.envelope.error).toBeUndefined();
    expect(ra.response?.status).toBe(200);
    // A settled (and its lane moved on to B) without B being released to its executor.
    expect(f.queue.releasedCount()).toBe(0);
    const bState = f.h.temp.journal
      .listActions({ fromTicket: 1, limit: 10 })
      .find((s) => s.action_id !== ra.envelope.invocation_id);
    expect(bState).toMatchObject({ dispatch_seq: null, outcome: null });
    await expect(f.server.waitForArrivals(2, 200)).rejects.toThrow(/expected 2 arrivals/);
    expect(f.server.markers()).toEqual(['A']);
    expect(await hasSettled(b)).toBe(false);
  });
});

describe('waitForCard', () => {
  it('waits on queue changes, not on time', async () => {
    f = await openQueueFixture();
    const run = f.submit('A');
    const shown = await waitForCard(f.queue, f.h.temp.journal.listActions().at(-1)?.ticket ?? 1, 'pending');
    expect(shown.state).toBe('pending');
    await f.queue.reject(shown.ticket, person, 'done');
    await run;
  });
});
