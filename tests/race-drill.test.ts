import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import { closeDrill, laneCards, op, openDrill, waitFor, type Drill } from './support/drill.js';
import type { DrillAgent, ToolReply } from './support/drill-agent.js';
import { repoRoot } from './support/postern-process.js';

/**
 * Article 001's two-write race drill as a release test, end to end: a real daemon, two separate
 * agent processes each using the real MCP SDK client through `postern mcp`, conflicting writes A
 * and B to one lane, both needing a per-call approval, and a disposable endpoint whose arrival log
 * is the effect. Every case of DESIGN.md §6, in both start orders, RUNS_PER_ORDER runs each with
 * the two calls sent in the same tick (tight overlap). Each run gets its own lane (doc-<run>), so
 * runs of one batch proceed side by side and never share a queue. Asserted separately: ticket
 * sequence, card states, dispatch order, the arrival log and the journal entries; each case's
 * evidence is saved under test-results/race-drill/.
 */
const RUNS_PER_ORDER = 20;
const BATCH = 5;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'pdrill-'));
const artifacts = path.join(repoRoot, 'test-results', 'race-drill');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

type Order = 'p1_first' | 'p2_first';
const orders: Order[] = ['p1_first', 'p2_first'];

/** One run's facts, saved as the case's evidence and asserted on. */
interface RunRecord {
  run: string;
  order: Order;
  tickets: { A: number; B: number };
  markers: { A: string; B: string };
  card_states: Array<{ step: string; A: string | null; B: string | null; B_text?: string }>;
  dispatch_seq: { A: number | null; B: number | null };
  arrivals: string[];
  journal: { A: string[]; B: string[] };
  replies: { A: unknown; B: unknown };
}

async function journalKinds(
  dataDir: string,
  actionId: string,
): Promise<{ kinds: string[]; dispatchSeq: number | null }> {
  const shown = await op(dataDir, 'actions.show', { action_id: actionId });
  return {
    kinds: shown.events.map((e) => e.kind),
    dispatchSeq: shown.events.find((e) => e.kind === 'DISPATCH_STARTED')?.seq ?? null,
  };
}

interface Started {
  run: string;
  lane: string;
  A: { card: ApprovalCard; marker: string; reply: Promise<ToolReply> };
  B: { card: ApprovalCard; marker: string; reply: Promise<ToolReply> };
  record: RunRecord;
}

/** Sends the two conflicting writes in one tick and waits for both cards; A is the older ticket. */
async function startRun(drill: Drill, run: string, order: Order): Promise<Started> {
  const doc = run;
  const lane = `doc-${doc}`;
  const markers = { p1: `${run}:p1`, p2: `${run}:p2` };
  const send = (agent: DrillAgent, marker: string) =>
    agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: `/docs/${doc}`,
      body: JSON.stringify({ marker }),
      timeout_ms: 120_000,
    });
  const [first, second] = order === 'p1_first' ? [drill.p1, drill.p2] : [drill.p2, drill.p1];
  const firstCall = send(first, first === drill.p1 ? markers.p1 : markers.p2);
  const secondCall = send(second, second === drill.p1 ? markers.p1 : markers.p2);
  const cards = await waitFor(
    () => laneCards(drill.dataDir, lane),
    (c) => c.length === 2 && c.every((x) => x.state === 'pending'),
    `two pending cards in ${lane}`,
  );
  const [cardA, cardB] = cards as [ApprovalCard, ApprovalCard];
  const markerOf = (card: ApprovalCard): string => (JSON.parse(card.body_preview ?? '{}') as { marker: string }).marker;
  const replyOf = (marker: string): Promise<ToolReply> =>
    (marker === markers.p1
      ? first === drill.p1
        ? firstCall
        : secondCall
      : first === drill.p2
        ? firstCall
        : secondCall
    ).reply;
  const A = { card: cardA, marker: markerOf(cardA), reply: replyOf(markerOf(cardA)) };
  const B = { card: cardB, marker: markerOf(cardB), reply: replyOf(markerOf(cardB)) };
  const record: RunRecord = {
    run,
    order,
    tickets: { A: cardA.ticket, B: cardB.ticket },
    markers: { A: A.marker, B: B.marker },
    card_states: [{ step: 'both submitted', A: cardA.state, B: cardB.state }],
    dispatch_seq: { A: null, B: null },
    arrivals: [],
    journal: { A: [], B: [] },
    replies: { A: null, B: null },
  };
  return { run, lane, A, B, record };
}

async function cardStates(drill: Drill, s: Started, step: string): Promise<{ A?: ApprovalCard; B?: ApprovalCard }> {
  const cards = await laneCards(drill.dataDir, s.lane);
  const A = cards.find((c) => c.ticket === s.A.card.ticket);
  const B = cards.find((c) => c.ticket === s.B.card.ticket);
  s.record.card_states.push({
    step,
    A: A?.state ?? null,
    B: B?.state ?? null,
    ...(B === undefined ? {} : { B_text: B.text }),
  });
  return { A, B };
}

async function finish(drill: Drill, s: Started): Promise<RunRecord> {
  const [a, b] = await Promise.all([
    journalKinds(drill.dataDir, s.A.card.action_id),
    journalKinds(drill.dataDir, s.B.card.action_id),
  ]);
  s.record.journal = { A: a.kinds, B: b.kinds };
  s.record.dispatch_seq = { A: a.dispatchSeq, B: b.dispatchSeq };
  s.record.arrivals = arrivalsOf(drill, [s.A.marker, s.B.marker]);
  return s.record;
}

const person = (what: string) => `drill: ${what}`;

/** This run's arrivals, in arrival order (other runs share the endpoint). */
function arrivalsOf(drill: Drill, markers: readonly string[]): string[] {
  return drill.log.markers().filter((m) => markers.includes(m));
}

/** Each case: what the person does, and what must then be true. Returns the finished record. */
const cases: Record<string, (drill: Drill, s: Started) => Promise<RunRecord>> = {
  async approve_b_first(drill, s) {
    await op(drill.dataDir, 'approvals.approve', { ticket: s.B.card.ticket });
    const { B } = await cardStates(drill, s, 'B approved');
    expect(B?.state).toBe('approved_waiting');
    expect(B?.text).toContain(`waiting for #${s.A.card.ticket}`);
    expect((await journalKinds(drill.dataDir, s.B.card.action_id)).dispatchSeq).toBeNull();
    expect(arrivalsOf(drill, [s.A.marker, s.B.marker])).toEqual([]);
    await op(drill.dataDir, 'approvals.approve', { ticket: s.A.card.ticket });
    const [ra, rb] = await Promise.all([s.A.reply, s.B.reply]);
    s.record.replies = { A: ra.structuredContent, B: rb.structuredContent };
    expect(ra.isError ?? false).toBe(false);
    expect(rb.isError ?? false).toBe(false);
    const record = await finish(drill, s);
    expect(record.arrivals).toEqual([s.A.marker, s.B.marker]);
    return record;
  },
  async reject_a(drill, s) {
    await op(drill.dataDir, 'approvals.reject', { ticket: s.A.card.ticket, reason: person('A conflicts') });
    await op(drill.dataDir, 'approvals.approve', { ticket: s.B.card.ticket });
    const [ra, rb] = await Promise.all([s.A.reply, s.B.reply]);
    s.record.replies = { A: ra.structuredContent, B: rb.structuredContent };
    expect(ra.isError).toBe(true);
    expect(ra.structuredContent?.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(rb.isError ?? false).toBe(false);
    const record = await finish(drill, s);
    expect(record.arrivals).toEqual([s.B.marker]);
    expect(record.journal.A).toContain('REJECTED');
    expect(record.journal.A).not.toContain('DISPATCH_STARTED');
    return record;
  },
  async a_expires(drill, s) {
    await op(drill.dataDir, 'approvals.approve', { ticket: s.B.card.ticket });
    const ra = await s.A.reply;
    expect(ra.structuredContent?.error).toMatchObject({ code: 'APPROVAL_EXPIRED', outcome: 'not_attempted' });
    const rb = await s.B.reply;
    s.record.replies = { A: ra.structuredContent, B: rb.structuredContent };
    expect(rb.isError ?? false).toBe(false);
    await expect(op(drill.dataDir, 'approvals.approve', { ticket: s.A.card.ticket })).rejects.toMatchObject({
      code: 'DECISION_CONFLICT',
      message: expect.stringContaining('expired'),
    });
    const record = await finish(drill, s);
    expect(record.arrivals).toEqual([s.B.marker]);
    expect(record.journal.A.filter((k) => k === 'EXPIRED')).toHaveLength(1);
    expect(record.journal.A).not.toContain('APPROVED');
    return record;
  },
  async cancel_b(drill, s) {
    await op(drill.dataDir, 'approvals.approve', { ticket: s.B.card.ticket });
    await op(drill.dataDir, 'approvals.cancel', { ticket: s.B.card.ticket, reason: person('B no longer wanted') });
    await op(drill.dataDir, 'approvals.approve', { ticket: s.A.card.ticket });
    const [ra, rb] = await Promise.all([s.A.reply, s.B.reply]);
    s.record.replies = { A: ra.structuredContent, B: rb.structuredContent };
    expect(ra.isError ?? false).toBe(false);
    expect(rb.isError).toBe(true);
    expect(rb.structuredContent?.error?.outcome).toBe('not_attempted');
    const record = await finish(drill, s);
    expect(record.arrivals).toEqual([s.A.marker]);
    expect(record.journal.B).toEqual(expect.arrayContaining(['APPROVED', 'CANCELLED']));
    expect(record.journal.B).not.toContain('DISPATCH_STARTED');
    return record;
  },
  async a_unknown(drill, s) {
    drill.drops.add(s.A.marker);
    await op(drill.dataDir, 'approvals.approve', { ticket: s.A.card.ticket });
    await op(drill.dataDir, 'approvals.approve', { ticket: s.B.card.ticket });
    const ra = await s.A.reply;
    expect(ra.structuredContent?.error?.outcome).toBe('unknown');
    // B waits behind the unknown head: blocked, never sent, until a person abandons A.
    const { B } = await cardStates(drill, s, 'A unknown');
    expect(B?.state).toBe('approved_waiting');
    expect(B?.waiting_for_ticket).toBe(s.A.card.ticket);
    const position = (await op(drill.dataDir, 'actions.show', { action_id: s.B.card.action_id })).queue;
    expect(position).toMatchObject({ waiting: 'lane_blocked', waiting_for_ticket: s.A.card.ticket });
    expect(arrivalsOf(drill, [s.A.marker, s.B.marker])).toEqual([s.A.marker]);
    expect((await journalKinds(drill.dataDir, s.B.card.action_id)).dispatchSeq).toBeNull();
    await op(drill.dataDir, 'approvals.abandon', {
      ticket: s.A.card.ticket,
      reason: person('checked by hand; release the lane'),
    });
    const rb = await s.B.reply;
    s.record.replies = { A: ra.structuredContent, B: rb.structuredContent };
    expect(rb.isError ?? false).toBe(false);
    const record = await finish(drill, s);
    expect(record.arrivals).toEqual([s.A.marker, s.B.marker]);
    expect(record.journal.A).toContain('ABANDONED');
    return record;
  },
};

function checkRecord(record: RunRecord): void {
  // Ticket sequence: A is the older ticket; both were issued before either card was decided.
  expect(record.tickets.A).toBeLessThan(record.tickets.B);
  expect(record.card_states[0]).toMatchObject({ A: 'pending', B: 'pending' });
  // Dispatch order: B never before A.
  if (record.dispatch_seq.B !== null) {
    if (record.dispatch_seq.A !== null) expect(record.dispatch_seq.A).toBeLessThan(record.dispatch_seq.B);
  }
  // Journal: both tickets recorded from admission.
  expect(record.journal.A[0]).toBe('ACTION_ACCEPTED');
  expect(record.journal.B[0]).toBe('ACTION_ACCEPTED');
}

async function runCase(drill: Drill, name: string, order: Order): Promise<RunRecord[]> {
  const records: RunRecord[] = [];
  for (let batch = 0; batch < RUNS_PER_ORDER; batch += BATCH) {
    const runs = Array.from(
      { length: Math.min(BATCH, RUNS_PER_ORDER - batch) },
      (_, i) => `${name.replaceAll('_', '-')}-${order === 'p1_first' ? 'a' : 'b'}-${batch + i}`,
    );
    const started = await Promise.all(runs.map((run) => startRun(drill, run, order)));
    const finished = await Promise.all(
      started.map((s) => (cases[name] as (d: Drill, s: Started) => Promise<RunRecord>)(drill, s)),
    );
    for (const record of finished) checkRecord(record);
    records.push(...finished);
  }
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(path.join(artifacts, `${name}-${order}.json`), `${JSON.stringify(records, null, 2)}\n`);
  return records;
}

describe('the two-write race drill (article 001), two agent processes through postern mcp', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'main', 120);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  it('an agent can never approve: its own child running `postern approvals` is refused, the operator is not', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const started = await startRun(drill, 'guard-0', 'p1_first');
    const fromAgent = await drill.p1.runPostern([
      'approvals',
      'approve',
      String(started.B.card.ticket),
      '--data-dir',
      drill.dataDir,
    ]);
    expect(fromAgent.code).toBe(1);
    expect(fromAgent.stderr).toContain('OPERATOR_ONLY');
    expect(fromAgent.stdout).not.toContain('approved');
    const listFromAgent = await drill.p2.runPostern(['approvals', 'list', '--data-dir', drill.dataDir]);
    expect(listFromAgent.stderr).toContain('OPERATOR_ONLY');
    expect((await laneCards(drill.dataDir, started.lane)).map((c) => c.state)).toEqual(['pending', 'pending']);
    // The person (this test process, no agent among its ancestors) decides; the run completes.
    await op(drill.dataDir, 'approvals.reject', { ticket: started.A.card.ticket, reason: person('guard check') });
    await op(drill.dataDir, 'approvals.reject', { ticket: started.B.card.ticket, reason: person('guard check') });
    await Promise.all([started.A.reply, started.B.reply]);
  }, 60_000);

  for (const name of ['approve_b_first', 'reject_a', 'cancel_b', 'a_unknown']) {
    for (const order of orders) {
      it(`${name}, ${order}: ${RUNS_PER_ORDER} runs`, async () => {
        if (drill === undefined) throw new Error('the drill did not start');
        const records = await runCase(drill, name, order);
        expect(records).toHaveLength(RUNS_PER_ORDER);
      }, 180_000);
    }
  }
});

describe('the race drill with a short approval TTL: A expires while B is approved', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'ttl', 2);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  for (const order of orders) {
    it(`a_expires, ${order}: ${RUNS_PER_ORDER} runs`, async () => {
      if (drill === undefined) throw new Error('the drill did not start');
      const records = await runCase(drill, 'a_expires', order);
      expect(records).toHaveLength(RUNS_PER_ORDER);
    }, 180_000);
  }
});
