import { describe, expect, it } from 'vitest';
import type { ApprovalCard, Reply } from '../../broker/contract/index.js';
import {
  createApprovalWatcher,
  describeCards,
  newCardsNeedingAPerson,
  notificationsPerPollMax,
  type CardNotice,
} from './approval-watcher.js';

function card(ticket: number, overrides: Partial<ApprovalCard> = {}): ApprovalCard {
  return {
    ticket,
    action_id: `act_${ticket}`,
    lane: 'route:billing',
    channel: 'http',
    approval: 'per_call',
    state: 'pending',
    waiting_for_ticket: null,
    text: 'waiting for a decision',
    session: {
      session_id: 'ses_1',
      status: 'approved',
      pid: 4242,
      exe: '/usr/bin/node',
      cwd: '/work',
      parent_exe: null,
      client_name: 'claude-code',
      record: 'confirmed',
    },
    target: 'route:billing',
    method: 'POST',
    path: '/v1/invoices',
    query: [],
    headers: [['x-secret-looking', 'value-never-shown']],
    command: null,
    body_preview: '{"amount": 100}',
    body_bytes: 15,
    credential: 'billing-token',
    request_fingerprint: 'sha256:abc',
    accepted_at_ms: 0,
    expires_at_ms: null,
    retry_of: null,
    dispatch_recorded: false,
    retry_possible: false,
    retry_until_ms: null,
    ...overrides,
  };
}

describe('which cards notify', () => {
  it('only cards that need a person and were not seen before', () => {
    const cards = [
      card(1),
      card(2, { state: 'approved_waiting' }),
      card(3, { state: 'awaiting_session' }),
      card(4, { state: 'dispatching' }),
      card(5, { state: 'blocked_head' }),
    ];
    expect(newCardsNeedingAPerson(new Set(), cards).map((c) => c.ticket)).toEqual([1, 3]);
    expect(newCardsNeedingAPerson(new Set([1]), cards).map((c) => c.ticket)).toEqual([3]);
  });

  it('say what and who, never a body or a header value', () => {
    const [notice] = describeCards([card(7)]);
    expect(notice).toEqual({
      title: 'Postern: approval needed (#7)',
      body: 'claude-code — POST route:billing/v1/invoices',
      ticket: 7,
    });
    expect(JSON.stringify(notice)).not.toContain('amount');
    expect(JSON.stringify(notice)).not.toContain('value-never-shown');
    const [ssh] = describeCards([
      card(8, {
        channel: 'ssh',
        method: null,
        path: null,
        command: 'systemctl restart web',
        session: null,
        state: 'awaiting_session',
      }),
    ]);
    expect(ssh).toMatchObject({
      title: 'Postern: a new agent process asks to act (#8)',
      body: 'an agent — route:billing: systemctl restart web',
    });
  });

  it('fold a burst into one summary line', () => {
    const notices = describeCards([1, 2, 3, 4, 5].map((n) => card(n)));
    expect(notices).toHaveLength(notificationsPerPollMax + 1);
    expect(notices.at(-1)).toEqual({
      title: 'Postern: more approvals waiting',
      body: '2 more cards waiting for a decision',
      ticket: undefined,
    });
  });
});

describe('the approval watcher', () => {
  function watcherOver(answers: Array<Reply<{ cards: ApprovalCard[] }>>) {
    const notified: CardNotice[] = [];
    const counts: number[] = [];
    let i = 0;
    const watcher = createApprovalWatcher({
      list: () => Promise.resolve(answers[Math.min(i++, answers.length - 1)] as Reply<{ cards: ApprovalCard[] }>),
      notify: (notice) => notified.push(notice),
      onCount: (count) => counts.push(count),
    });
    return { watcher, notified, counts };
  }

  it('seeds silently at start, then notifies each new card once', async () => {
    const { watcher, notified, counts } = watcherOver([
      { ok: true, value: { cards: [card(1)] } },
      { ok: true, value: { cards: [card(1), card(2)] } },
      { ok: true, value: { cards: [card(1), card(2)] } },
      { ok: true, value: { cards: [card(2, { state: 'dispatching' })] } },
    ]);
    for (let n = 0; n < 4; n += 1) await watcher.poll();
    expect(notified.map((notice) => notice.ticket)).toEqual([2]);
    expect(counts).toEqual([1, 2, 2, 0]);
  });

  it('keeps quiet and keeps its memory when the broker refuses to answer', async () => {
    const { watcher, notified, counts } = watcherOver([
      { ok: true, value: { cards: [card(1)] } },
      { ok: false, error: { code: 'JOURNAL_UNAVAILABLE', message: 'x' } },
      { ok: true, value: { cards: [card(1)] } },
    ]);
    for (let n = 0; n < 3; n += 1) await watcher.poll();
    expect(notified).toEqual([]);
    expect(counts).toEqual([1, 1]);
  });
});
