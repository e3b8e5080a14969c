import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpUpstreams, type McpChannelReport, type McpServerSpec } from '../channels/mcp/index.js';
import { isCodedError } from '../contract/index.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { startOAuthServers, type OAuthServers } from '../testing/upstream-mcp/oauth-servers.js';
import { mcpOAuthFileName } from './mcp-oauth-store.js';
import { createUpstreamOAuth } from './operator-mcp-oauth.js';
import { mcpAuthorized } from '../testing/action-paths.js';
import { createTestBrowser } from '../testing/test-browser.js';

/**
 * OAuth 2.1 + PKCE for a streamable_http upstream, end to end on loopback: a real authorization server and resource
 * server (broker/testing/upstream-mcp/oauth-servers.ts), the broker's real McpOAuth with its sealed file store and
 * guarded fetch, the real channel, a real journal as the dispatch gate. The "person's browser" is an HTTP client
 * with a cookie jar following the start link (broker/testing/test-browser.ts). The AS puts `canary` in every token.
 */
const canary = 'pst-oauth-canary-5d1e07b3';
const fingerprint = `sha256:${'0a'.repeat(32)}`;

let temp: TempJournal;
let servers: OAuthServers;
let upstreams: McpUpstreams;
let oauth: ReturnType<typeof createUpstreamOAuth>;
let spec: McpServerSpec;
const { logger, lines } = createCapturedLogger();
/** The broker's clock runs ahead of real time by `skewMs`: how a test brings a token near its expiry. */
let skewMs = 0;
const clock = { nowMs: () => Date.now() + skewMs };
let actions = 0;
const reports: McpChannelReport[] = [];

beforeAll(async () => {
  temp = await openTempJournal();
  servers = await startOAuthServers({ canary, accessTtlS: 3600 });
  const vault = await createMemoryVault();
  oauth = createUpstreamOAuth({ dataDir: temp.dir.path, vault, clock, logger });
  upstreams = new McpUpstreams({
    gate: temp.journal,
    logger,
    clock,
    oauth,
    secretsFor: () => Promise.resolve({ env: {}, headers: {}, secrets: [] }),
  });
  spec = { name: 'wiki', transport: 'streamable_http', url: servers.mcpUrl, oauth: {}, warmMs: 60_000 };
});
afterAll(async () => {
  oauth.close();
  await upstreams.stopAll('broker_stopping');
  await servers.close();
  await temp.dispose();
});

async function admit(): Promise<string> {
  actions += 1;
  const id = `act_${String(actions).padStart(26, '0')}`;
  const events = mcpAuthorized(id, {
    lane: 'mcp-oauth-test',
    target: 'mcp:wiki.echo',
    fingerprint,
    injectionMode: 'none',
  });
  for (const event of events) await temp.journal.append(event);
  return id;
}

async function call(tool = 'echo'): Promise<{ id: string; report: McpChannelReport }> {
  const id = await admit();
  const report = await upstreams.call(spec, {
    actionId: id,
    attempt: 1,
    tool,
    arguments: { text: 'hello' },
    deadlineMs: 10_000,
  });
  reports.push(report);
  return { id, report };
}

function kinds(actionId: string): string[] {
  return temp.journal
    .subjectEvents(actionId)
    .map((e) => e.kind)
    .filter((k) => !['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'CREDENTIAL_AUTHORIZED'].includes(k));
}

/** The person's browser: the start link, its redirect to the AS, the AS's redirect to the loopback callback. */
async function consent(startUrl: string): Promise<{ status: number; visited: string[] }> {
  const answer = await createTestBrowser('person').open(startUrl);
  expect(answer.visited).toHaveLength(3);
  expect(answer.visited[2]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
  return answer;
}

function grantFile(): Buffer {
  return readFileSync(join(temp.dir.path, mcpOAuthFileName));
}

describe('when the server needs OAuth and no person has authorized it', () => {
  it('a call fails in setup (stage authorize): nothing journaled past it, nothing reached the server', async () => {
    const { id, report } = await call();
    expect(report).toMatchObject({
      dispatchStarted: false,
      setup: { failure: 'mcp_authorization', stage: 'authorize', detail: 'not_authorized' },
    });
    expect(kinds(id)).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(servers.resourceRequests()).toBe(0);
    expect(upstreams.status()[0]?.auth).toBe('required');
  });

  it('tools/list is refused with MCP_AUTHORIZATION_REQUIRED', async () => {
    const refused = await upstreams.listTools(spec).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isCodedError(refused) && refused.code).toBe('MCP_AUTHORIZATION_REQUIRED');
  });
});

describe('when a person authorizes', () => {
  it('a forged callback (wrong state) is refused and changes nothing; the real one completes', async () => {
    const started = await oauth.authorize(spec);
    const redirectUri = new URL(started.startUrl).origin + '/callback';
    const forged = await fetch(`${redirectUri}?code=stolen&state=${'A'.repeat(43)}`);
    expect(forged.status).toBe(400);
    expect(oauth.authState(spec)).toBe('required');
    expect(servers.tokenRefusals()).toBe(0);
    const answer = await consent(started.startUrl);
    expect(new URL(answer.visited[1] ?? '').searchParams.get('code_challenge_method')).toBe('S256');
    expect(answer.status).toBe(200);
    await expect(started.done).resolves.toBe('authorized');
    expect(upstreams.status()[0]?.auth).toBe('ok');
    expect(servers.registrations()).toBe(1);
    expect(servers.codesRedeemed()).toBe(1);
    // One callback is redeemed: a second one (even the same one replayed) is refused.
    expect((await fetch(answer.visited[2] ?? '')).status).toBe(400);
    expect(servers.codesRedeemed()).toBe(1);
  });

  it('a call succeeds with the token, injected by the broker', async () => {
    const { report } = await call();
    expect(report).toMatchObject({ dispatchStarted: true, reply: { kind: 'result' } });
    expect(servers.toolCalls()).toHaveLength(1);
    expect(servers.toolCalls()[0]?.authorization).toMatch(new RegExp(`^Bearer at-${canary}-1-`));
    expect(servers.refreshes()).toBe(0);
  });

  it('the sealed grant file is not plaintext and is 0600', () => {
    const bytes = grantFile();
    expect(bytes.includes(canary)).toBe(false);
    expect(bytes.includes('refresh_token')).toBe(false);
    expect(statSync(join(temp.dir.path, mcpOAuthFileName)).mode & 0o777).toBe(0o600);
  });
});

describe('when the token nears its expiry', () => {
  it('it is refreshed in setup (AS refresh count 1) and the call uses the new token', async () => {
    skewMs = 3600_000 - 30_000;
    const { report } = await call();
    expect(report).toMatchObject({ dispatchStarted: true, reply: { kind: 'result' } });
    expect(servers.refreshes()).toBe(1);
    expect(servers.toolCalls().at(-1)?.authorization).toMatch(new RegExp(`^Bearer at-${canary}-2-`));
  });

  it('a refresh the AS refuses: not attempted (stage authorize), nothing reached the server, authorization required', async () => {
    servers.refuseRefresh();
    skewMs = 2 * 3600_000;
    const requestsBefore = servers.resourceRequests();
    const { id, report } = await call();
    expect(report).toMatchObject({
      dispatchStarted: false,
      handedToTransport: false,
      setup: { failure: 'mcp_authorization', stage: 'authorize', detail: 'refresh_refused' },
    });
    expect(kinds(id)).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(servers.resourceRequests()).toBe(requestsBefore);
    expect(servers.toolCalls()).toHaveLength(2);
    expect(upstreams.status()[0]?.auth).toBe('required');
  });
});

describe('where the tokens never appear', () => {
  it('no log line, journal byte, status, report or data file holds a token', async () => {
    await upstreams.stopAll('broker_stopping');
    expect(lines.join('\n')).not.toContain(canary);
    expect(JSON.stringify(upstreams.status())).not.toContain(canary);
    expect(JSON.stringify(reports)).not.toContain(canary);
    for (const name of readdirSync(temp.dir.path)) {
      const path = join(temp.dir.path, name);
      if (statSync(path).isFile()) expect(readFileSync(path).includes(canary), name).toBe(false);
    }
    // The tokens did reach the resource server: the canary search can find them.
    expect(servers.toolCalls()[0]?.authorization).toContain(canary);
  });
});
