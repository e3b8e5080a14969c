import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpActionResult } from './http-action-deps.js';
import { AdversarialHttpServer, type Behavior } from '../testing/adversarial-http-server.js';
import {
  canary,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { waitForCardCount } from '../testing/queue-waits.js';

/**
 * DESIGN §3: the invocation binds a configuration snapshot, the credential version among it, re-checked right before
 * the write. Performed with the real executor, queue, vault and channel: the route's credential is rotated, or removed
 * and added again as another account's under the same name, while the action's card waits; the person's approval then
 * sends nothing.
 */
let h: HttpActionHarness;
const servers: AdversarialHttpServer[] = [];
beforeEach(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  await h.dispose();
});

async function server(behavior: Behavior): Promise<AdversarialHttpServer> {
  const s = await AdversarialHttpServer.start({ script: () => behavior });
  servers.push(s);
  return s;
}
const post = { route: 'docs', method: 'POST', path: '/documents/7', body: '{"title":"x"}' };
const kinds = (events: ReturnType<HttpActionHarness['events']>): string[] => events.map((e) => e.kind);

describe('when the route’s credential changes between admission and dispatch', () => {
  async function pendingPerCall(port: number): Promise<{ run: Promise<HttpActionResult>; ticket: number; id: string }> {
    const config = localRouteConfig(port);
    const route = config.routes.get('docs');
    if (route === undefined) throw new Error('no route');
    const perCall = { ...config, routes: new Map([['docs', { ...route, approval: 'per_call' as const }]]) };
    const run = h.run(perCall, post);
    const [card] = await waitForCardCount(h.queue, 1);
    return { run, ticket: card?.ticket ?? 0, id: card?.action_id ?? '' };
  }

  /** A person approves the waiting card: the action is refused before the write, and the remote saw nothing. */
  async function approvedAndRefusedUnsent(
    pending: { run: Promise<HttpActionResult>; ticket: number; id: string },
    s: AdversarialHttpServer,
    why: string,
  ): Promise<void> {
    await h.queue.approve(pending.ticket, { kind: 'person', id: 'tester' });
    const { envelope } = await pending.run;
    expect(envelope.error).toMatchObject({
      code: 'FINGERPRINT_MISMATCH',
      outcome: 'not_attempted',
      message: expect.stringContaining(why) as unknown,
    });
    expect(s.log).toHaveLength(0);
    expect(kinds(h.events(pending.id))).not.toContain('DISPATCH_STARTED');
  }

  it('a rotation while the card waits: the approved action is FINGERPRINT_MISMATCH, not_attempted, and nothing is sent', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    const before = h.vault.describe('docs-token');
    const pending = await pendingPerCall(s.port);
    const [accepted] = h.events(pending.id);
    expect(accepted).toMatchObject({
      kind: 'ACTION_ACCEPTED',
      payload: { credential: { id: before?.id, version_tag: before?.version_tag } },
    });
    const rotated = await h.vault.rotate('docs-token', Buffer.from(`${canary}-rotated`));
    expect(rotated.version_tag).not.toBe(before?.version_tag);
    await approvedAndRefusedUnsent(pending, s, 'rotated since this action was admitted');
    // The next request binds the new version and goes out with it.
    const next = await h.run(localRouteConfig(s.port), post);
    expect(next.envelope.error).toBeUndefined();
    expect(h.events(next.envelope.invocation_id)[0]).toMatchObject({
      payload: { credential: { version_tag: rotated.version_tag } },
    });
  });

  it('another credential under the same name (removed and added again): refused the same way', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    const pending = await pendingPerCall(s.port);
    await h.vault.remove('docs-token');
    await h.vault.add({
      name: 'docs-token',
      kind: 'bearer',
      secret: Buffer.from(`${canary}-other-account`),
      bindings: ['docs', '127.0.0.1'],
    });
    await approvedAndRefusedUnsent(pending, s, 'replaced since this action was admitted');
  });
});
