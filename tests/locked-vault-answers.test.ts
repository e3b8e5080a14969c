import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeDrill,
  drillPassphrase,
  laneCards,
  op,
  openDrill,
  postMarker,
  waitFor,
  type Drill,
} from './support/drill.js';
import type { DrillAgent, ToolReply } from './support/drill-agent.js';
import { decideAsPerson, unlockAsPerson } from './support/person-decision.js';
import { startDaemon } from './support/postern-process.js';
import { within } from './support/recovery-rig.js';

/**
 * What an agent is told while the vault is locked after a restart, through a real daemon and a real MCP SDK client
 * (`postern mcp`; the same agent process, so the same session, across the restart), on the drill's per-call route:
 * - `action_status` of an action a person approved in the earlier run answers the plaintext record (ticket, lane,
 *   outcome, its decision's state and time) with the decision marked `sealed` — who decided is in sealed events only —
 *   instead of failing as a whole; after the unlock it names who decided.
 * - `retry_of` that action, refused because its record is sealed, is retry `backoff` (ask again after the unlock), not
 *   `never`.
 * - a new call approved while the vault is locked is recorded `not_attempted`, `VAULT_LOCKED`, retry `backoff` (nothing
 *   was sent, nothing in the call is wrong), never `after_correction`; the same call goes through after the unlock.
 * The bearer secret never appears in any answer.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'plocked-'));
const canary = 'CANARY-drill-token-never-shown';
let drill: Drill | undefined;

beforeAll(async () => {
  drill = await openDrill(scratch, 'locked', 120);
}, 90_000);
afterAll(async () => {
  await closeDrill(drill);
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

/** Posts `marker` to /docs/`doc`, approves its card as a person, and returns the answer. */
async function approvedPost(
  d: Drill,
  agent: DrillAgent,
  doc: string,
  marker: string,
  by: 'process' | 'person',
): Promise<ToolReply> {
  const answer = postMarker(agent, doc, marker);
  const [card] = await waitFor(
    () => laneCards(d.dataDir, `doc-${doc}`),
    (c) => c.length === 1 && c[0]?.state === 'pending',
    `${marker}'s card pending`,
  );
  // The drill's unattended opt-out while its passphrase file unlocked it; after a restart that holds only once the
  // vault is unlocked, so a person decides with the passphrase as proof.
  const ticket = { ticket: card?.ticket ?? 0 };
  if (by === 'process') await op(d.dataDir, 'approvals.approve', ticket);
  else await decideAsPerson(d.dataDir, drillPassphrase, 'approvals.approve', ticket);
  const { reply, error } = await within(answer, `${marker}'s answer`);
  if (reply === undefined) throw new Error(`${marker}: ${error ?? 'no answer'}`);
  return reply;
}

function status(agent: DrillAgent, actionId: string): Promise<ToolReply> {
  return within(agent.call('action_status', { action_id: actionId }).reply, 'action_status');
}

function textOf(reply: ToolReply): string {
  return (reply.content ?? []).map((c) => c.text ?? '').join('\n');
}

describe('when the broker restarts locked under an agent that acted in its earlier run', () => {
  it('answers what is readable, says what is sealed, and tells the agent to call again after the unlock', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const d = drill;
    const first = await approvedPost(d, d.p1, 'a', 'A', 'process');
    expect(first.isError ?? false).toBe(false);
    const actionId = first.structuredContent?.invocation_id ?? '';
    expect(actionId).toMatch(/^act_/);
    const ticket = (first.structuredContent as { ticket?: number }).ticket;

    await d.daemon.process.stop('SIGKILL');
    // Started locked: the earlier run's events open only once a person unlocks.
    d.daemon = await startDaemon(d.dataDir);

    // action_status: the plaintext record, its decision's state and time, and what is sealed — not a refusal.
    const locked = await status(d.p1, actionId);
    expect(locked.isError ?? false).toBe(false);
    expect(locked.structuredContent).toMatchObject({
      invocation_id: actionId,
      ticket,
      lane: 'doc-a',
      effect: 'succeeded',
      decision: {
        state: 'approved',
        by: null,
        reason: null,
        decided_at_ms: expect.any(Number) as number,
        expires_at_ms: null,
        sealed: true,
      },
    });
    expect(locked.structuredContent).not.toHaveProperty('error');
    expect(textOf(locked)).toContain('sealed in the journal: read again once a person unlocks the vault');
    expect(textOf(locked)).not.toContain(canary);

    // retry_of the sealed earlier action: refused before anything is recorded, and temporary — retry backoff.
    const retry = await within(
      d.p1.call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/a',
        body: JSON.stringify({ marker: 'A' }),
        retry_of: actionId,
      }).reply,
      'retry_of while locked',
    );
    expect(retry.isError).toBe(true);
    expect(retry.structuredContent).toMatchObject({ invocation_id: null, error: { retry: 'backoff' } });
    expect(['AUDIT_KEY_UNAVAILABLE', 'VAULT_LOCKED']).toContain(retry.structuredContent?.error?.code);
    expect(textOf(retry)).toContain('retry: backoff');

    // A new call approved while locked: nothing sent, retry backoff (the same call once a person unlocks).
    const lockedCall = await approvedPost(d, d.p1, 'b', 'B', 'person');
    expect(lockedCall.isError).toBe(true);
    expect(lockedCall.structuredContent?.error).toMatchObject({
      code: 'VAULT_LOCKED',
      phase: 'credential_injection',
      outcome: 'not_attempted',
      retry: 'backoff',
    });
    const lockedId = lockedCall.structuredContent?.invocation_id ?? '';
    expect((await status(d.p1, lockedId)).structuredContent?.error).toMatchObject({
      code: 'VAULT_LOCKED',
      retry: 'backoff',
    });
    expect(d.log.arrivals.some((a) => a.marker === 'B')).toBe(false);

    await unlockAsPerson(d.dataDir, drillPassphrase);
    // Unlocked: who decided is read from the events, nothing is marked sealed.
    const unlocked = await status(d.p1, actionId);
    expect(unlocked.structuredContent).toMatchObject({ decision: { state: 'approved', by: { kind: 'process' } } });
    expect(unlocked.structuredContent).not.toHaveProperty('decision.sealed');
    expect(textOf(unlocked)).not.toContain('sealed in the journal');
    // The same call again goes through.
    const again = await approvedPost(d, d.p1, 'b', 'B', 'person');
    expect(again.isError ?? false).toBe(false);
    expect(again.structuredContent).toMatchObject({ effect: 'succeeded' });
    for (const reply of [locked, retry, lockedCall, unlocked, again]) expect(textOf(reply)).not.toContain(canary);
  }, 120_000);
});
