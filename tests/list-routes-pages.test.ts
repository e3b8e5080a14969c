import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerJsonMarker } from '../broker/agent/answer-text.js';
import { listRoutesEntriesMax, listRoutesRulesMax, type AgentRouteList } from '../broker/contract/index.js';
import { connectPostern } from '../broker/sdk/index.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { connectSdkClient } from './support/mcp-sdk-client.js';

/**
 * list_routes answers a page at a time, so a config with many routes and rules never makes one unbounded answer: at
 * most listRoutesEntriesMax entries and listRoutesRulesMax rules a page, an entry never split, and `more` (with a
 * `… N more … not shown` text line) saying how many follow and the offset that lists them. Through `postern mcp`
 * against a real daemon, with the MCP SDK's client (which validates structuredContent against the outputSchema).
 */
const canary = 'CANARY-list-pages-5e2';
/** docs (the helper's route), then r001…r149: r010, r011 and r012 with 200 rules each; then two SSH host entries. */
const extraRoutes = Array.from({ length: 149 }, (_, i) => `r${String(i + 1).padStart(3, '0')}`);
const manyRules = new Set(['r010', 'r011', 'r012']);
const rulesEach = 200;
const hosts = ['box-a', 'box-b'];
const allNames = ['docs', ...extraRoutes, ...hosts];

let running: BearerRouteDaemon;
let client: Client;

beforeAll(async () => {
  running = await startBearerRouteDaemon({
    prefix: 'plpages-',
    canary,
    approval: 'per_call',
    respond: (_req, res) => res.end('{}'),
    yaml: [
      ...extraRoutes.flatMap((name) => [
        `  - name: ${name}`,
        '    base_url: http://127.0.0.1:9',
        '    credential: docs-token',
        '    injection: bearer',
        '    approval: per_call',
        ...(manyRules.has(name)
          ? [
              '    rules:',
              ...Array.from(
                { length: rulesEach },
                (_, i) => `      - { methods: [GET], path: '/p${i}/**', approval: per_call }`,
              ),
            ]
          : []),
      ]),
      'ssh_hosts:',
      ...hosts.flatMap((name) => [
        `  - name: ${name}`,
        '    host: 127.0.0.1',
        '    port: 22',
        '    user: deploy',
        '    credential: box-key',
        `    host_key: { pinned: ['SHA256:${'A'.repeat(43)}'] }`,
        '    approval: per_call',
        '    commands:',
        "      - { command: 'uptime' }",
      ]),
    ],
  });
  client = await connectSdkClient(running.dataDir, 'list-pages-agent');
}, 120_000);

afterAll(async () => {
  await client?.close().catch(() => undefined);
  await running?.stop();
});

async function listRoutes(args: Record<string, unknown>): Promise<{ page: AgentRouteList; text: string }> {
  const result = (await client.callTool({ name: 'list_routes', arguments: args })) as CallToolResult;
  expect(result.isError).toBe(false);
  const first = result.content[0];
  return {
    page: result.structuredContent as AgentRouteList,
    text: first?.type === 'text' ? first.text.slice(0, first.text.indexOf(answerJsonMarker)) : '',
  };
}

async function refusedTarget(name: string, args: Record<string, unknown>): Promise<{ code: string; message: string }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError).toBe(true);
  const { error } = result.structuredContent as { error: { code: string; message: string } };
  expect(error.code).toBe('INVALID_TARGET');
  return error;
}

const namesOf = (page: AgentRouteList): string[] => [...page.routes, ...page.ssh_hosts].map((e) => e.name);
const rulesOf = (page: AgentRouteList): number =>
  page.routes.reduce((n, r) => n + r.rules.length, 0) + page.ssh_hosts.reduce((n, h) => n + h.commands.length, 0);

describe('list_routes on a real daemon with 150 routes and two SSH host entries', () => {
  it('answers pages within its bounds, says how many more are not shown, and the offsets list every entry once', async () => {
    // The rules bound closes the first page: r012's 200 rules would take it past 512.
    const first = await listRoutes({});
    expect(namesOf(first.page)).toEqual(allNames.slice(0, 12));
    expect(first.page.offset).toBeUndefined();
    expect(first.page.more).toEqual({ not_shown: 140, next_offset: 12 });
    expect(first.text).toContain('… 140 more routes and SSH host entries not shown: call list_routes with offset 12');

    // The entries bound closes the second.
    const second = await listRoutes({ offset: 12 });
    expect(namesOf(second.page)).toEqual(allNames.slice(12, 112));
    expect(second.page).toMatchObject({ offset: 12, more: { not_shown: 40, next_offset: 112 } });
    expect(second.text).toContain('from entry 12 (routes first, then SSH host entries');

    // The last: routes then the SSH host entries, nothing more.
    const last = await listRoutes({ offset: 112 });
    expect(last.page.routes.map((r) => r.name)).toEqual(extraRoutes.slice(111));
    expect(last.page.ssh_hosts.map((h) => h.name)).toEqual(hosts);
    expect(last.page.more).toBeUndefined();
    expect(last.text).not.toContain('not shown');

    for (const { page } of [first, second, last]) {
      // One listing: every page names the digest of the whole it was cut from.
      expect(page.list_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(page.list_digest).toBe(first.page.list_digest);
      expect(namesOf(page).length).toBeLessThanOrEqual(listRoutesEntriesMax);
      expect(rulesOf(page)).toBeLessThanOrEqual(listRoutesRulesMax);
    }
    expect([first, second, last].flatMap(({ page }) => namesOf(page))).toEqual(allNames);
    expect(rulesOf(first.page) + rulesOf(second.page) + rulesOf(last.page)).toBe(3 * rulesEach + hosts.length);
  });

  it('answers an empty page past the last entry, and refuses an offset that is not a whole number from 0', async () => {
    const past = await listRoutes({ offset: 500 });
    expect(past.page).toEqual({
      offset: 500,
      list_digest: (await listRoutes({})).page.list_digest,
      routes: [],
      ssh_hosts: [],
    });
    for (const offset of [-1, 1.5, 'x', 5000]) {
      const result = (await client.callTool({ name: 'list_routes', arguments: { offset } })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ error: { code: 'INVALID_ARGUMENT', field: 'offset' } });
    }
  });

  it("an unknown SSH host entry names every configured one, past list_routes' first page", async () => {
    const error = await refusedTarget('ssh_exec', { host: 'no-such-box', command: 'uptime' });
    expect(error.message).toMatch(/; configured SSH host entries: box-a, box-b$/);
  });

  it('an unknown route names the configured ones from the config, as many whole names as the message bound holds', async () => {
    const error = await refusedTarget('http_request', { route: 'no-such-route', method: 'GET', path: '/' });
    expect(error.message.length).toBeLessThanOrEqual(1000);
    const listed = error.message.slice(error.message.indexOf('; configured routes: ') + '; configured routes: '.length);
    const cut = listed.endsWith(', … (list_routes has them all)');
    const names = (cut ? listed.slice(0, -', … (list_routes has them all)'.length) : listed).split(', ');
    // Whole names in config order, from the config: more than list_routes' first page (12 entries) holds.
    expect(names).toEqual(allNames.slice(0, names.length));
    expect(names.length).toBeGreaterThan(100);
    if (!cut) expect(names).toEqual(allNames.slice(0, 150));
  });

  it("the SDK's listRoutes() follows the pages to the last and answers the whole list, as one page would", async () => {
    const sdk = await connectPostern({ dataDir: running.dataDir, clientName: 'list-pages-sdk' });
    try {
      const whole = await sdk.listRoutes();
      expect(namesOf(whole)).toEqual(allNames);
      expect(whole.offset).toBeUndefined();
      expect(whole.more).toBeUndefined();
      expect(rulesOf(whole)).toBe(3 * rulesEach + hosts.length);
      // The entries are list_routes' own: the pages' entries, each once, in config order.
      const pages = [await listRoutes({}), await listRoutes({ offset: 12 }), await listRoutes({ offset: 112 })];
      expect(whole.list_digest).toBe(pages[0]?.page.list_digest);
      expect(whole.routes).toEqual(pages.flatMap(({ page }) => page.routes));
      expect(whole.ssh_hosts).toEqual(pages.flatMap(({ page }) => page.ssh_hosts));
    } finally {
      await sdk.close();
    }
  });
});
