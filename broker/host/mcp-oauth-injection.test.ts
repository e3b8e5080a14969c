import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { McpServerSpec } from '../channels/mcp/index.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { createTestBrowser } from '../testing/test-browser.js';
import { startOAuthServers, type OAuthServers } from '../testing/upstream-mcp/oauth-servers.js';
import { createUpstreamOAuth } from './operator-mcp-oauth.js';

/**
 * Authorization-code injection (login CSRF) against `mcp_servers.authorize`, performed: a same-user agent that reads
 * what the person's browser leaves behind (history, xdg-open's argv) starts its own authorization at the provider
 * with the person's URL, logged in as itself (`x-account: attacker`), and delivers the resulting code with the
 * person's state to the broker's loopback listener first. Real AS and RS on 127.0.0.1 (oauth-servers.ts), the
 * broker's real McpOAuth with its sealed file store and guarded fetch; `bearer()` says whose token the broker uses.
 */
const canary = 'pst-oauth-inj-canary-41c9';
let servers: OAuthServers;
let dir: TempDir;
let oauth: ReturnType<typeof createUpstreamOAuth>;
let named = 0;
const { logger } = createCapturedLogger();

beforeAll(async () => {
  servers = await startOAuthServers({ canary });
  dir = createTempDir();
  oauth = createUpstreamOAuth({
    dataDir: dir.path,
    vault: await createMemoryVault(),
    clock: { nowMs: () => Date.now() },
    logger,
  });
});
afterEach(() => oauth.close());
afterAll(async () => {
  await servers.close();
  dir.remove();
});

/** A fresh server name per test: every test authorizes from nothing. */
function spec(): McpServerSpec {
  named += 1;
  return { name: `wiki${named}`, transport: 'streamable_http', url: servers.mcpUrl, oauth: {}, warmMs: 60_000 };
}

async function accountInUse(server: McpServerSpec): Promise<string | undefined> {
  if (oauth.authState(server) !== 'ok') return undefined;
  return servers.accountOf((await oauth.bearer(server)).slice('Bearer '.length));
}

async function portIsTaken(port: number): Promise<boolean> {
  const probe = createServer();
  probe.listen(port, '127.0.0.1');
  const [event] = await Promise.race([once(probe, 'listening').then(() => ['listening']), once(probe, 'error')]);
  probe.close();
  return event !== 'listening';
}

describe('when an agent that read the provider URL delivers its own code first', () => {
  it('it is refused, nothing is redeemed, and the person’s flow completes with the person’s account', async () => {
    const server = spec();
    const redeemed = servers.codesRedeemed();
    const started = await oauth.authorize(server);
    expect(started.startUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/start\?n=[\w-]{43}$/);
    const person = createTestBrowser('person');
    // The person opens the start link; the browser now holds the provider URL (history) with the state.
    const start = await person.get(started.startUrl);
    expect(start.status).toBe(302);
    const providerUrl = start.location ?? '';
    expect(new URL(providerUrl).searchParams.get('state')).toMatch(/^[\w-]{43}$/);
    // The agent replays it at the provider as itself and delivers its code with the person's state.
    const agent = createTestBrowser('attacker');
    const atAs = await agent.get(providerUrl);
    const injected = await agent.get(atAs.location ?? '');
    expect(injected.status).toBe(400);
    expect(servers.codesRedeemed()).toBe(redeemed);
    expect(oauth.authState(server)).toBe('required');
    const port = Number(new URL(providerUrl).searchParams.get('redirect_uri')?.match(/:(\d+)\//)?.[1]);
    expect(await portIsTaken(port)).toBe(true);
    // The person consents at the provider and is redirected back with the cookie.
    const answer = await person.open(providerUrl);
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('Postern is authorized');
    await expect(started.done).resolves.toBe('authorized');
    expect(servers.codesRedeemed()).toBe(redeemed + 1);
    expect(await accountInUse(server)).toBe('person');
  });

  it('an error= with the person’s state but no cookie does not end the authorization', async () => {
    const server = spec();
    const started = await oauth.authorize(server);
    const person = createTestBrowser('person');
    const providerUrl = (await person.get(started.startUrl)).location ?? '';
    const redirectUri = new URL(providerUrl).searchParams.get('redirect_uri') ?? '';
    const state = new URL(providerUrl).searchParams.get('state') ?? '';
    const refused = await fetch(`${redirectUri}?state=${state}&error=access_denied`);
    expect(refused.status).toBe(400);
    const settled = await Promise.race([started.done, new Promise((r) => setTimeout(() => r('pending'), 100))]);
    expect(settled).toBe('pending');
    expect((await person.open(providerUrl)).status).toBe(200);
    await expect(started.done).resolves.toBe('authorized');
    expect(await accountInUse(server)).toBe('person');
  });
});

describe('when an agent opens the start link before the person', () => {
  it('the person is told the link was used, the authorization fails, no grant is stored', async () => {
    const server = spec();
    const redeemed = servers.codesRedeemed();
    const started = await oauth.authorize(server);
    const agent = createTestBrowser('attacker');
    const providerUrl = (await agent.get(started.startUrl)).location ?? '';
    expect(providerUrl).toContain(servers.issuer);
    const person = await createTestBrowser('person').get(started.startUrl);
    expect(person.status).toBe(409);
    expect(person.text).toContain('someone else did');
    await expect(started.done).resolves.toBe('link_reused');
    // The agent's own flow, cookie and all, no longer completes.
    expect((await agent.open(providerUrl)).status).toBe(400);
    expect(servers.codesRedeemed()).toBe(redeemed);
    expect(oauth.authState(server)).toBe('required');
  });

  it('even when it completed its own flow first, the grant is dropped once the person opens the link', async () => {
    const server = spec();
    const started = await oauth.authorize(server);
    const agent = createTestBrowser('attacker');
    expect((await agent.open(started.startUrl)).status).toBe(200);
    await expect(started.done).resolves.toBe('authorized');
    expect(await accountInUse(server)).toBe('attacker');
    // The listener is still bound: the person's browser reaches Postern, not a process that took the port.
    const person = await createTestBrowser('person').get(started.startUrl);
    expect(person.status).toBe(409);
    expect(oauth.authState(server)).toBe('required');
    expect(await accountInUse(server)).toBeUndefined();
  });
});
