import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import type { NewEvent } from '../contract/index.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { ApprovalQueue, type Turn } from './approval-queue.js';
import { httpCardPreview, httpRequestView } from './card-preview.js';
import { gateClassification } from './decision-events.js';

const fp = `sha256:${'e'.repeat(64)}`;
const person = { kind: 'person' as const, id: 'reviewer' };
const config = parseConfig('version: 1\n');
const request = { method: 'POST', path: '/documents/7', query: [], headers: [], body: Buffer.from('{}') };
const preview = httpCardPreview({ name: 'docs', credential: 'docs-token' }, request, httpRequestView(request));
/** More than one page of the queue's bounded lane reads (1000). */
const closedBehindHead = 1_050;

let temp: TempJournal;
let queue: ApprovalQueue;
afterEach(async () => {
  queue.close();
  await temp.dispose();
});

const admit = (id: string, approval: 'none' | 'per_call'): NewEvent[] => [
  {
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    lane: 'document-7',
    payload: {
      channel: 'http',
      target: 'route:docs POST /documents/7',
      request_fingerprint: fp,
      approval,
      idempotent: false,
    },
  },
  { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
];

/** Head A (per-call, pending) with a waiting executor, then many tickets closed behind it, then B (approval none) waiting. */
async function laneBeyondOnePage(): Promise<{ ticketA: number; ticketB: number; turnB: Promise<Turn> }> {
  temp = await openTempJournal();
  queue = ApprovalQueue.open({ journal: temp.journal, clock: temp.clock, config });
  const a = 'act_pagingA000001';
  await temp.journal.appendBatch(admit(a, 'per_call'));
  queue.awaitTurn(a, preview).catch(() => undefined);
  // Journal batches hold at most 256 events: 80 closed actions (240 events) per batch.
  for (let start = 0; start < closedBehindHead; start += 80) {
    const batch: NewEvent[] = [];
    for (let i = start; i < Math.min(start + 80, closedBehindHead); i += 1) {
      const id = `act_pagingC${String(i).padStart(6, '0')}`;
      batch.push(...admit(id, 'none'), {
        kind: 'CANCELLED',
        action_id: id,
        payload: { actor: person, reason: 'filler' },
        classification: gateClassification('operator_cancelled'),
      });
    }
    await temp.journal.appendBatch(batch);
  }
  const b = 'act_pagingB000001';
  await temp.journal.appendBatch(admit(b, 'none'));
  const turnB = queue.awaitTurn(b, preview);
  return { ticketA: temp.journal.getAction(a)?.ticket ?? 0, ticketB: temp.journal.getAction(b)?.ticket ?? 0, turnB };
}

describe('when a lane holds more than one page of tickets behind its head', () => {
  it('the head resolving releases a ticket beyond the first page (the lane is not taken for empty)', async () => {
    const { ticketA, ticketB, turnB } = await laneBeyondOnePage();
    expect(ticketB - ticketA).toBeGreaterThan(1_000);
    expect(queue.position('act_pagingB000001')).toMatchObject({ waiting: 'lane', waiting_for_ticket: ticketA });
    await queue.reject(ticketA, person, 'no');
    expect(await turnB).toEqual({ kind: 'go' });
  }, 30_000);

  it('a ticket beyond the first page that is cancelled hears closed, and is gone from the cards', async () => {
    const { ticketA, ticketB, turnB } = await laneBeyondOnePage();
    expect(queue.cards().map((c) => [c.ticket, c.state])).toEqual([
      [ticketA, 'pending'],
      [ticketB, 'approved_waiting'],
    ]);
    await queue.cancel(ticketB, person, 'not needed');
    expect(await turnB).toMatchObject({ kind: 'closed', state: { decision: 'cancelled' } });
    expect(queue.cards().map((c) => c.ticket)).toEqual([ticketA]);
  }, 30_000);
});

describe('when a session has more actions than one page of the journal’s session list', () => {
  it('revoking it cancels its newest waiting ticket too', async () => {
    temp = await openTempJournal();
    queue = ApprovalQueue.open({ journal: temp.journal, clock: temp.clock, config });
    const sessionId = 'ses_paging000000000000000000000001';
    await temp.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: sessionId,
      payload: {
        pid: 4242,
        uid: 1000,
        start_time: '1',
        ppid: 1,
        exe: null,
        cwd: null,
        parent_exe: null,
        client_name: null,
        client_version: null,
      },
    });
    const mine = (events: NewEvent[]): NewEvent[] =>
      events.map((e) => (e.kind === 'ACTION_ACCEPTED' ? { ...e, session_id: sessionId, lane: null } : e));
    for (let start = 0; start < closedBehindHead; start += 80) {
      const batch: NewEvent[] = [];
      for (let i = start; i < Math.min(start + 80, closedBehindHead); i += 1) {
        const id = `act_pagingS${String(i).padStart(6, '0')}`;
        batch.push(...mine(admit(id, 'none')), {
          kind: 'CANCELLED',
          action_id: id,
          payload: { actor: person, reason: 'filler' },
          classification: gateClassification('operator_cancelled'),
        });
      }
      await temp.journal.appendBatch(batch);
    }
    const late = 'act_pagingL000001';
    await temp.journal.appendBatch(mine(admit(late, 'per_call')));
    const turn = queue.awaitTurn(late, preview);
    await queue.revokeSession(sessionId, person, 'unknown agent');
    expect(await turn).toMatchObject({ kind: 'closed', state: { decision: 'cancelled' } });
  }, 30_000);
});
