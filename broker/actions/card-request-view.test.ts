import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../journal/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import {
  canary,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';

/**
 * A card rebuilt from the journal — a blocked head once its executor returned, and after a restart — shows the request
 * the person saw while it waited: the agent's query, headers and body size, read back from ACTION_ACCEPTED's sealed
 * `request_view` (never from the plaintext target, which stays sanitized). While the vault is locked an earlier run's
 * event cannot be opened, and the card says so instead of showing an empty query as if there were none.
 */
let h: HttpActionHarness;
let remote: AdversarialHttpServer;
beforeAll(async () => {
  h = await openHttpActionHarness();
  remote = await AdversarialHttpServer.start({
    journalPath: h.temp.path,
    script: () => ({ kind: 'apply_then_close' }),
  });
});
afterAll(async () => {
  await remote.stop();
  await h.dispose();
});

const query = [
  ['all', 'true'],
  ['q', 'a b&c'],
  // A value longer than a card shows: cut, and the pair says how much is hidden (never a "…" added to the value).
  ['big', 'Q'.repeat(512), { name_hidden: 0, value_hidden: 2500 - 512 }],
  // More pairs than a card shows: the last says how many more in a third element only the broker writes.
  ...Array.from({ length: 28 }, (_, i) => [`p${i}`, 'v']),
  ['…', '7 more not shown', { pairs_hidden: 7 }],
];
const extra = Object.fromEntries(Array.from({ length: 35 }, (_, i) => [`p${i}`, 'v']));

describe('when a card is rebuilt from the journal', () => {
  it("shows the agent's query, headers and body size; while the vault is locked it says they are sealed", async () => {
    // The credential goes in a query parameter (api_key): it must never show beside the agent's own pairs.
    const config = localRouteConfig(remote.port, '', { credential: 'docs-query', injection: 'query' });
    const run = await h.run(config, {
      route: 'docs',
      method: 'DELETE',
      path: '/users',
      query: { all: 'true', q: 'a b&c', big: 'Q'.repeat(2500), ...extra },
      headers: { 'X-Note': 'purge' },
      body: '{"why":"x"}',
    });
    expect(run.envelope.error).toMatchObject({ outcome: 'unknown' });
    const id = run.envelope.invocation_id;
    const live = h.queue.cards().find((c) => c.action_id === id);
    // The executor returned (its in-memory preview is gone): the card is the journal's, and still the whole request.
    expect(live).toMatchObject({ state: 'blocked_head', method: 'DELETE', path: '/users', query, body_bytes: 11 });
    expect(live?.headers).toEqual([['x-note', 'purge']]);
    expect(live?.request_details).toBeUndefined();
    // The plaintext target holds no query (the contract of the actions table, 282da05).
    expect(h.temp.journal.getAction(id)?.target).toBe('route:docs DELETE /users');

    // A restart with the vault locked: the action is an earlier run's, its events sealed.
    h.queue.close();
    await h.temp.journal.close();
    h.temp.vault.lock();
    const journal = await Journal.open({ path: h.temp.path, clock: h.temp.clock, vault: h.temp.vault });
    const queue = ApprovalQueue.open({ journal, clock: h.temp.clock, config });
    try {
      const locked = queue.cards().find((c) => c.action_id === id);
      expect(locked).toMatchObject({ state: 'blocked_head', path: '/users', query: [], request_details: 'sealed' });

      h.temp.vault.unlock();
      const unlocked = queue.cards().find((c) => c.action_id === id);
      expect(unlocked).toMatchObject({ state: 'blocked_head', method: 'DELETE', path: '/users', query });
      expect(unlocked?.headers).toEqual([['x-note', 'purge']]);
      expect(unlocked?.body_bytes).toBe(11);
      expect(unlocked?.request_details).toBeUndefined();
      // The same card as before the restart (the credential's name aside: the harness's own queue has no routes).
      expect({ ...unlocked, credential: '' }).toEqual({ ...live, credential: '' });
      expect(JSON.stringify([live, locked, unlocked])).not.toContain('api_key');
      expect(JSON.stringify([live, locked, unlocked])).not.toContain(canary);
    } finally {
      queue.close();
      await journal.close();
    }
  });
});
