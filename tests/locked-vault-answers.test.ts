import { describe, expect, it } from 'vitest';
import { drillForFile, drillPassphrase, laneCards, op, postMarker, waitFor, type Drill } from './support/drill.js';
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
 * - `retry_of` an action on a route with a retry policy, refused because its record is sealed, is retry `backoff` (ask
 *   again after the unlock), not `never`; `retry_of` an action on a route without one (`docs`) is refused
 *   `UNSUPPORTED_ACTION`, retry `never`, at once — the route's policy is plaintext configuration, and the unlock
 *   changes nothing about it — as it is after the unlock.
 * - a new call approved while the vault is locked is recorded `not_attempted`, `VAULT_LOCKED`, retry `backoff` (nothing
 *   was sent, nothing in the call is wrong), never `after_correction`; the same call goes through after the unlock.
 * The bearer secret never appears in any answer.
 */
const canary = 'CANARY-drill-token-never-shown';
// A second route on the same arrival log, with a retry policy: a retry_of there is refused only by the sealed record.
const theDrill = drillForFile('plocked-', 'locked', 120, [
  '  - name: retrying',
  '    base_url: http://127.0.0.1:{port}',
  '    credential: drill-token',
  '    injection: bearer',
  '    approval: none',
  '    methods: [POST]',
  '    retry: { attempts_max: 2, automatic: false, backoff_ms: 0 }',
  '    lanes:',
  "      - { methods: ['*'], path: '/docs/{doc}', lane: 'retry-{doc}' }",
]);

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

/** `retry_of` `actionId`, resending `marker`'s POST to /docs/`doc` on `route`. */
function retryOf(agent: DrillAgent, route: string, doc: string, marker: string, actionId: string): Promise<ToolReply> {
  const request = { route, method: 'POST', path: `/docs/${doc}`, body: JSON.stringify({ marker }), retry_of: actionId };
  return within(agent.call('http_request', request).reply, `retry_of ${actionId} on ${route}`);
}

function textOf(reply: ToolReply): string {
  return (reply.content ?? []).map((c) => c.text ?? '').join('\n');
}

describe('when the broker restarts locked under an agent that acted in its earlier run', () => {
  it('answers what is readable, says what is sealed, and tells the agent to call again after the unlock', async () => {
    const d = theDrill();
    const first = await approvedPost(d, d.p1, 'a', 'A', 'process');
    expect(first.isError ?? false).toBe(false);
    const actionId = first.structuredContent?.invocation_id ?? '';
    expect(actionId).toMatch(/^act_/);
    const ticket = (first.structuredContent as { ticket?: number }).ticket;
    // On the route with a retry policy (no card: approval none).
    const onRetrying = await within(
      d.p1.call('http_request', {
        route: 'retrying',
        method: 'POST',
        path: '/docs/r',
        body: JSON.stringify({ marker: 'R' }),
      }).reply,
      'the post on the retrying route',
    );
    expect(onRetrying.structuredContent).toMatchObject({ effect: 'succeeded' });
    const retryingId = onRetrying.structuredContent?.invocation_id ?? '';
    expect(retryingId).toMatch(/^act_/);

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

    // retry_of an action on a route without a retry policy: no unlock changes that (plaintext configuration), so the
    // permanent answer comes at once — UNSUPPORTED_ACTION, never — not a backoff the unlock would turn into it.
    const noPolicy = await retryOf(d.p1, 'docs', 'a', 'A', actionId);
    expect(noPolicy.isError).toBe(true);
    expect(noPolicy.structuredContent).toMatchObject({
      invocation_id: null,
      error: { code: 'UNSUPPORTED_ACTION', retry: 'never', field: 'retry_of' },
    });
    expect(textOf(noPolicy)).toContain('retry: never');

    // retry_of the sealed earlier action on the route with a retry policy: refused before anything is recorded, and
    // temporary — retry backoff.
    const retry = await retryOf(d.p1, 'retrying', 'r', 'R', retryingId);
    expect(retry.isError).toBe(true);
    expect(retry.structuredContent).toMatchObject({ invocation_id: null, error: { retry: 'backoff' } });
    expect(['AUDIT_KEY_UNAVAILABLE', 'VAULT_LOCKED']).toContain(retry.structuredContent?.error?.code);
    expect(textOf(retry)).toContain('retry: backoff');
    expect(d.log.arrivals.filter((a) => a.marker === 'R')).toHaveLength(1);

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
    // The retry_of on the route without a retry policy: the same answer as while locked.
    const noPolicyUnlocked = await retryOf(d.p1, 'docs', 'a', 'A', actionId);
    expect(noPolicyUnlocked.structuredContent).toMatchObject({
      invocation_id: null,
      error: { code: 'UNSUPPORTED_ACTION', retry: 'never', field: 'retry_of' },
    });
    // The same call again goes through.
    const again = await approvedPost(d, d.p1, 'b', 'B', 'person');
    expect(again.isError ?? false).toBe(false);
    expect(again.structuredContent).toMatchObject({ effect: 'succeeded' });
    for (const reply of [locked, noPolicy, retry, lockedCall, unlocked, noPolicyUnlocked, again])
      expect(textOf(reply)).not.toContain(canary);
  }, 120_000);
});
