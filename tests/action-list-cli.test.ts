import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionListRow } from '../broker/contract/index.js';
import { closeDrill, laneCards, openDrill, waitFor, type Drill } from './support/drill.js';
import { PosternProcess } from './support/postern-process.js';

/**
 * `postern actions list`, `actions show`'s waited-for lines and `activity --newest` as real CLI
 * processes against a running daemon, with calls made by a real agent process through `postern mcp`.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'palcli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

describe('postern actions list against a running daemon', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'alist', 120);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  it('lists one line per action newest first, pages by --before, filters, and shows what #2 waited for', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const dir = ['--data-dir', drill.dataDir];
    const send = (marker: string) =>
      (drill as Drill).p1.call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/alist',
        body: JSON.stringify({ marker }),
        timeout_ms: 60_000,
      }).reply;
    const first = send('alist-first');
    const [a] = await waitFor(
      () => laneCards(drill?.dataDir ?? '', 'doc-alist'),
      (cards) => cards.length === 1,
      'the first card',
    );
    const second = send('alist-second');
    const [, b] = await waitFor(
      () => laneCards(drill?.dataDir ?? '', 'doc-alist'),
      (cards) => cards.length === 2,
      'the second card',
    );
    if (a === undefined || b === undefined) throw new Error('no cards');
    expect((await cli(['approvals', 'approve', String(b.ticket), ...dir])).code).toBe(0);
    expect((await cli(['approvals', 'reject', String(a.ticket), '--reason', 'not the first', ...dir])).code).toBe(0);
    await Promise.all([first, second]);

    const listed = await cli(['actions', 'list', '--json', '--lane', 'doc-alist', ...dir]);
    expect(listed.code).toBe(0);
    const page = JSON.parse(listed.stdout) as { actions: ActionListRow[]; next_before: number | null };
    expect(page.actions.map((r) => r.ticket)).toEqual([b.ticket, a.ticket]);
    expect(page.actions[0]).toMatchObject({
      target: 'docs',
      method: 'POST',
      request: '/docs/alist',
      decision: 'approved',
      outcome: 'committed',
      agent: { pid: expect.any(Number) },
    });
    expect(page.actions[0]?.decided_by).toMatch(/^process:\S+ pid \d+ \(cli, unattended\)$/);
    expect(page.actions[0]?.duration_ms).toBeGreaterThanOrEqual(0);
    expect(page.actions[1]).toMatchObject({ decision: 'rejected', outcome: 'not_attempted', code: 'APPROVAL_DENIED' });
    expect(listed.stdout).not.toContain('CANARY');

    const text = await cli(['actions', 'list', '--lane', 'doc-alist', '--limit', '1', ...dir]);
    const [line, more] = text.stdout.trim().split('\n');
    expect(line).toContain(`#${b.ticket}  `);
    expect(line).toMatch(/docs {2}POST \/docs\/alist {2}\[doc-alist\] {2}approved by process:/);
    expect(more).toBe(`(more: --before ${page.actions[0]?.first_seq})`);
    const next = await cli([
      'actions',
      'list',
      '--lane',
      'doc-alist',
      '--limit',
      '1',
      '--before',
      String(page.actions[0]?.first_seq),
      ...dir,
    ]);
    expect(next.stdout).toContain(`#${a.ticket}  `);
    expect(next.stdout).toContain('not_attempted/no_effect (APPROVAL_DENIED)');
    expect(next.stdout).not.toContain('(more:');
    const open = JSON.parse(
      (await cli(['actions', 'list', '--json', '--open', '--lane', 'doc-alist', ...dir])).stdout,
    ) as typeof page;
    expect(open.actions).toEqual([]);
    const bad = await cli(['actions', 'list', '--outcome', 'failed', ...dir]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/INVALID_ARGUMENT.*--outcome/);
    const tooMany = await cli(['actions', 'list', '--limit', '501', ...dir]);
    expect(tooMany.stderr).toMatch(/INVALID_ARGUMENT.*--limit/);

    const shown = await cli(['actions', 'show', b.action_id, ...dir]);
    expect(shown.stdout).toMatch(new RegExp(`waited [0-9.]+ (ms|s) for #${a.ticket} \\(${a.action_id}\\)`));
    const shownJson = JSON.parse((await cli(['actions', 'show', b.action_id, '--json', ...dir])).stdout) as {
      waited_for: unknown[];
    };
    expect(shownJson.waited_for).toEqual([
      { ticket: a.ticket, action_id: a.action_id, waited_ms: expect.any(Number), ongoing: false },
    ]);

    const newest = JSON.parse((await cli(['activity', '--newest', '--limit', '3', '--json', ...dir])).stdout) as {
      events: Array<{ seq: number }>;
    };
    const status = JSON.parse((await cli(['status', '--json', ...dir])).stdout) as { journal?: { last_seq: number } };
    const lastSeq = status.journal?.last_seq ?? newest.events.at(-1)?.seq ?? 0;
    expect(newest.events).toHaveLength(3);
    expect(newest.events.at(-1)?.seq).toBeLessThanOrEqual(lastSeq);
    expect(newest.events.map((e) => e.seq)).toEqual([0, 1, 2].map((i) => (newest.events[0]?.seq ?? 0) + i));
    expect(newest.events[0]?.seq).toBeGreaterThan(1);
    const both = await cli(['activity', '--newest', '--from', '1', ...dir]);
    expect(both.stderr).toMatch(/INVALID_ARGUMENT.*--newest/);

    // A session or action the journal holds, on a page with nothing to show: an empty answer, not "no session".
    const sessionId = page.actions[0]?.session_id ?? '';
    const ofSession = JSON.parse((await cli(['activity', '--session', sessionId, '--json', ...dir])).stdout) as {
      events: Array<{ session_id: string | null }>;
    };
    expect(ofSession.events.length).toBeGreaterThan(0);
    expect(ofSession.events.every((e) => e.session_id === sessionId)).toBe(true);
    for (const args of [
      ['activity', '--session', sessionId, '--lane', 'no-such-lane'],
      ['activity', '--session', sessionId, '--from', String(lastSeq + 1000)],
      ['activity', '--action', a.action_id, '--text', 'no-such-text'],
    ]) {
      expect(await cli([...args, ...dir])).toMatchObject({ code: 0, stdout: 'No events match.', stderr: '' });
    }
    expect(await cli(['actions', 'list', '--session', sessionId, '--lane', 'no-such-lane', ...dir])).toMatchObject({
      code: 0,
      stdout: 'No actions match.',
      stderr: '',
    });
  }, 90_000);
});
