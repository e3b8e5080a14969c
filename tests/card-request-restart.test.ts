import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorFileOf } from '../broker/host/integrity-anchor.js';
import { closeDrill, drillPassphrase, laneCards, openDrill, waitFor, type Drill } from './support/drill.js';
import { unlockAsPerson } from './support/person-decision.js';
import { PosternProcess, startDaemon } from './support/postern-process.js';

/**
 * A card the broker rebuilds after a restart shows the request the person saw before it: a real daemon, a real agent
 * process (through `postern mcp`) asking for `POST /docs/q?all=true&…` on a per-call route. The daemon stops while
 * the card waits; its next start finds the journal quarantined (the integrity anchor moved ahead), so recovery leaves
 * the action unknown and its card is rebuilt from the journal as a blocked head. Started locked, the card says its
 * query is sealed (never an empty query passed off as none); once a person unlocks, the operator API's approvals.list
 * and `postern approvals list` show the query, the agent's header and the body size again — never the credential.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pcardq-'));
const lane = 'doc-q';
let drill: Drill | undefined;

beforeAll(async () => {
  drill = await openDrill(scratch, 'cardq', 120);
}, 90_000);
afterAll(async () => {
  await closeDrill(drill);
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

async function approvalsList(dataDir: string): Promise<string> {
  const proc = new PosternProcess(['approvals', 'list', '--data-dir', dataDir]);
  const exit = await proc.exitWithin();
  expect(exit.code, proc.stderr).toBe(0);
  return proc.stdout;
}

describe('when the broker restarts with a card of a request that had a query', () => {
  it('the rebuilt card shows the query once the vault is unlocked, and says it is sealed before', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const d = drill;
    void d.p1
      .call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/q',
        // big: longer than a card shows; the agent's own "…" ends the cut part, which must not pass for the cut.
        query: { all: 'true', note: 'a b&c', big: `${'Q'.repeat(511)}…${'Q'.repeat(1988)}` },
        headers: { 'X-Note': 'purge' },
        body: JSON.stringify({ marker: 'Q' }),
        timeout_ms: 60_000,
      })
      .reply.catch(() => undefined);
    const [before] = await waitFor(
      () => laneCards(d.dataDir, lane),
      (c) => c.length === 1 && c[0]?.state === 'pending',
      'the card pending',
    );
    const query = [
      ['all', 'true'],
      ['note', 'a b&c'],
      ['big', `${'Q'.repeat(511)}…`, { name_hidden: 0, value_hidden: 1988 }],
    ];
    expect(before).toMatchObject({ method: 'POST', path: '/docs/q', query, headers: [['x-note', 'purge']] });
    const bodyBytes = before?.body_bytes;
    expect(bodyBytes).toBeGreaterThan(0);

    // The restart: stopped with the card open, started again on a journal its anchor no longer vouches for, locked.
    await d.daemon.process.stop('SIGTERM');
    await Promise.allSettled([d.p1.stop(), d.p2.stop()]);
    const anchorFile = anchorFileOf(d.dataDir);
    const anchor = JSON.parse(readFileSync(anchorFile, 'utf8')) as { counter: number };
    writeFileSync(anchorFile, JSON.stringify({ ...anchor, counter: anchor.counter + 5 }));
    d.daemon = await startDaemon(d.dataDir);

    const [locked] = await laneCards(d.dataDir, lane);
    expect(locked).toMatchObject({ ticket: before?.ticket, state: 'blocked_head', path: '/docs/q', query: [] });
    expect(locked?.request_details).toBe('sealed');
    const lockedLine = await approvalsList(d.dataDir);
    expect(lockedLine).toContain('POST /docs/q');
    expect(lockedLine).toContain('sealed in the journal: unlock the vault to show them');

    await unlockAsPerson(d.dataDir, drillPassphrase);
    const [after] = await laneCards(d.dataDir, lane);
    expect(after).toMatchObject({
      ticket: before?.ticket,
      state: 'blocked_head',
      method: 'POST',
      path: '/docs/q',
      query,
      headers: [['x-note', 'purge']],
      body_bytes: bodyBytes,
    });
    expect(after?.request_details).toBeUndefined();
    const line = await approvalsList(d.dataDir);
    expect(line).toContain(
      `POST /docs/q?all=true&note=a%20b%26c&big=${'Q'.repeat(511)}%E2%80%A6…[1,988 more characters not shown] [x-note: "purge"]`,
    );
    expect(line).not.toContain('sealed in the journal');
    for (const shown of [JSON.stringify([locked, after]), lockedLine, line])
      expect(shown).not.toContain('CANARY-drill-token-never-shown');
  }, 120_000);
});
