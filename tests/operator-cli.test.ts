import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDrill, laneCards, openDrill, waitFor, type Drill } from './support/drill.js';
import type { ToolReply } from './support/drill-agent.js';
import { PosternProcess } from './support/postern-process.js';

/**
 * The operator CLI end to end: real `postern approvals|actions|sessions|activity` processes against
 * a running daemon whose cards come from a real agent process (through `postern mcp`). Text and
 * --json output, decisions, a late decision (DECISION_CONFLICT), an unknown ticket (NOT_FOUND),
 * missing --reason (usage), and no daemon at all.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'popcli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

describe('the operator CLI against a running daemon', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'cli', 120);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  it('lists cards, approves, rejects with a reason, refuses a late decision, and shows the record', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const dir = ['--data-dir', drill.dataDir];
    const send = (marker: string): Promise<ToolReply> =>
      (drill as Drill).p1.call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/cli',
        body: JSON.stringify({ marker }),
        timeout_ms: 60_000,
      }).reply;
    const first = send('cli-first');
    const second = send('cli-second');
    const [a, b] = await waitFor(
      () => laneCards(drill?.dataDir ?? '', 'doc-cli'),
      (cards) => cards.length === 2,
      'two cards',
    );
    if (a === undefined || b === undefined) throw new Error('no cards');

    const listed = await cli(['approvals', 'list', '--json', ...dir]);
    expect(listed.code).toBe(0);
    const json = JSON.parse(listed.stdout) as {
      cards: Array<{ ticket: number; credential: string; body_preview: string }>;
    };
    expect(json.cards.map((c) => c.ticket)).toEqual(expect.arrayContaining([a.ticket, b.ticket]));
    expect(listed.stdout).toContain('drill-token');
    expect(listed.stdout).not.toContain('CANARY');
    const text = await cli(['approvals', 'list', ...dir]);
    expect(text.stdout).toContain(`#${a.ticket} [doc-cli] waiting for approval`);
    // The body a person decides on, escaped on one line: its size and a bounded preview.
    expect(text.stdout).toContain('POST /docs/cli  body 22 bytes "{\\"marker\\":\\"cli-first\\"}"');

    const approvedB = await cli(['approvals', 'approve', `#${b.ticket}`, ...dir]);
    expect(approvedB.code).toBe(0);
    expect(approvedB.stdout).toContain(`Ticket #${b.ticket} approved`);
    expect((await cli(['approvals', 'list', ...dir])).stdout).toContain(`approved, waiting for #${a.ticket}`);

    const noReason = await cli(['approvals', 'reject', String(a.ticket), ...dir]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain('INVALID_ARGUMENT');
    const rejected = await cli(['approvals', 'reject', String(a.ticket), '--reason', 'not this one', ...dir]);
    expect(rejected.code).toBe(0);
    const late = await cli(['approvals', 'approve', String(a.ticket), ...dir]);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/DECISION_CONFLICT .*already rejected/);
    const unknown = await cli(['approvals', 'approve', '999999', ...dir]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('NOT_FOUND');

    const [ra, rb] = await Promise.all([first, second]);
    expect([ra.structuredContent?.error?.code, rb.structuredContent?.error?.code].sort()).toEqual(
      ['APPROVAL_DENIED', undefined].sort(),
    );

    const shown = await cli(['actions', 'show', b.action_id, '--json', ...dir]);
    expect(shown.code).toBe(0);
    const record = JSON.parse(shown.stdout) as {
      state: { outcome: string; ticket: number };
      events: Array<{ kind: string; seq: number }>;
    };
    expect(record.state).toMatchObject({ outcome: 'committed', ticket: b.ticket });
    expect(record.events.map((e) => e.kind)).toEqual(
      expect.arrayContaining(['ACTION_ACCEPTED', 'CARD_SHOWN', 'APPROVED', 'DISPATCH_STARTED', 'RESULT_COMMITTED']),
    );
    const shownText = await cli(['actions', 'show', a.action_id, ...dir]);
    expect(shownText.stdout).toContain('REJECTED');
    expect(shownText.stdout).toContain('not this one');

    const sessions = await cli(['sessions', '--json', ...dir]);
    const list = JSON.parse(sessions.stdout) as {
      sessions: Array<{ status: string; calls: number; connected: boolean }>;
    };
    expect(list.sessions.filter((s) => s.status === 'approved' && s.connected)).toHaveLength(2);
    expect(list.sessions.some((s) => s.calls >= 2)).toBe(true);

    const activity = await cli(['activity', '--json', '--action', a.action_id, ...dir]);
    const page = JSON.parse(activity.stdout) as { events: Array<{ seq: number; kind: string; action_id: string }> };
    expect(page.events.every((e) => e.action_id === a.action_id)).toBe(true);
    const seqs = page.events.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(page.events.map((e) => e.kind)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CARD_SHOWN',
      'REJECTED',
    ]);
    // Filters keep the original positions: the rejection is found by its outcome and code, at its own seq.
    const rejectedOnly = JSON.parse(
      (
        await cli([
          'activity',
          '--json',
          '--outcome',
          'not_attempted',
          '--code',
          'APPROVAL_DENIED',
          '--action',
          a.action_id,
          ...dir,
        ])
      ).stdout,
    ) as typeof page;
    expect(rejectedOnly.events.map((e) => [e.seq, e.kind])).toEqual([[seqs.at(-1), 'REJECTED']]);
    const bad = await cli(['activity', '--outcome', 'failed', ...dir]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/INVALID_ARGUMENT.*--outcome/);
  }, 90_000);

  it('settles an unknown head by attestation (never not_attempted) and counts it in metrics', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const dir = ['--data-dir', drill.dataDir];
    drill.drops.add('cli-unknown');
    const reply = drill.p2.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/cli-attest',
      body: JSON.stringify({ marker: 'cli-unknown' }),
      timeout_ms: 60_000,
    }).reply;
    const [card] = await waitFor(
      () => laneCards(drill?.dataDir ?? '', 'doc-cli-attest'),
      (cards) => cards.length === 1,
      'the card',
    );
    if (card === undefined) throw new Error('no card');
    expect((await cli(['approvals', 'approve', String(card.ticket), ...dir])).code).toBe(0);
    expect((await reply).structuredContent?.error?.outcome).toBe('unknown');

    const never = await cli([
      'actions',
      'attest',
      card.action_id,
      '--outcome',
      'not_attempted',
      '--effect',
      'no_effect',
      '--basis',
      'x',
      ...dir,
    ]);
    expect(never.code).toBe(2);
    expect(never.stderr).toContain('INVALID_ARGUMENT --outcome');
    const attested = await cli([
      'actions',
      'attest',
      card.action_id,
      '--outcome',
      'committed',
      '--effect',
      'succeeded',
      '--basis',
      'seen in the remote audit log',
      ...dir,
    ]);
    expect(attested.code).toBe(0);
    expect(attested.stdout).toContain('settled by your attestation: committed');
    const shown = await cli(['actions', 'show', card.action_id, ...dir]);
    expect(shown.stdout).toContain('source operator_attested');
    expect(shown.stdout).toContain('seen in the remote audit log');
    // The lane this unknown head blocked was released by the person's attestation, at its seq.
    const attestedSeq = /journal seq (\d+)/.exec(attested.stdout)?.[1] ?? 'none';
    // The drill opts out for unattended use: the record names this CLI process, never a person.
    expect(shown.stdout).toMatch(/lane released by: operator_attested by process:\S+ pid \d+ \(cli, unattended\)/);
    expect(shown.stdout).not.toContain('by person:');
    expect(shown.stdout).toContain(` at seq ${attestedSeq}: seen in the remote audit log; outcome committed`);

    const metrics = JSON.parse((await cli(['metrics', '--json', ...dir])).stdout) as {
      by_phase_outcome: Array<{ phase: string; outcome: string; count: number }>;
      by_code: Array<{ code: string }>;
      decisions: Array<{ decision: string; count: number }>;
    };
    expect(metrics.by_phase_outcome).toEqual(
      expect.arrayContaining([expect.objectContaining({ phase: 'remote_execution', outcome: 'committed' })]),
    );
    // The person's rejection earlier in this file is a decision, never a credential_injection failure.
    expect(metrics.decisions).toEqual(expect.arrayContaining([expect.objectContaining({ decision: 'rejected' })]));
    expect(metrics.by_code.map((c) => c.code)).not.toContain('APPROVAL_DENIED');
    const text = (await cli(['metrics', ...dir])).stdout;
    expect(text).toMatch(/remote_execution\s+committed\s+\d+/);
    expect(text).toMatch(/closed before dispatch by a decision or a restart:\n(.*\n)*\s+rejected\s+\d+/);
  }, 90_000);
});

describe('the operator CLI with no daemon', () => {
  it('says no broker is running and how to start one', async () => {
    const dataDir = path.join(scratch, 'empty');
    mkdirSync(dataDir, { mode: 0o700 });
    const result = await cli(['approvals', 'list', '--data-dir', dataDir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('NOT_FOUND --data-dir: no broker is running');
    expect(result.stderr).toContain('postern daemon --data-dir');
  });
});
