import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpUpstreams } from '../channels/mcp/index.js';
import { parseConfig, type PosternConfig } from '../config/index.js';
import { watchEventLoop } from '../testing/event-loop-gaps.js';
import { canary, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { stdioServerCommand } from '../testing/upstream-mcp/index.js';
import { executeMcpAction, type McpActionDeps } from './execute-mcp-action.js';
import { mcpSecrets, withServerSecrets } from './mcp-server-secrets.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';

/**
 * THREAT-MODEL 4 on the `mcp` channel: one agent must not wedge the others. The attack: a tool whose reply the agent
 * shapes — the test server's `echo`, which answers its arguments as text and as structuredContent — is called with
 * ~480 KB of base64 over binary that carries a zlib header look-alike every 64 bytes. Every run is decoded and every
 * look-alike costs the scrubber decoder calls, up to its per-input budget: run at once (the sync scrub), that is
 * hundreds of milliseconds in which the daemon answers nobody. The defence (execute-mcp-action.ts `deliver`): the
 * reply is scrubbed in slices that give the event loop a turn every few milliseconds, before `settle`.
 *
 * Real parts: a real stdio MCP server child (broker/testing/upstream-mcp), the broker's McpUpstreams with the
 * production secrets path (withServerSecrets over the real vault), a real journal and result store. The bounds are
 * relative, as in execute-http-decode-yields.test.ts, and hold on a loaded 2-core box for that reason: the reply's sync
 * scrub is measured here and must exceed 200 ms, and the median of three calls' largest gaps between 1 ms ticks must
 * stay under half of it (measured: 45-135 ms against 450-910; an absolute 100 ms bound failed 1 run in 6 at load 5).
 * With `deliver` scrubbing at once (scrub instead of scrubAsync) the largest gap is the whole scrub: the test fails.
 */
let h: HttpActionHarness;
let upstreams: McpUpstreams;
let config: PosternConfig;
let deps: McpActionDeps;
let blob: string;

beforeAll(async () => {
  h = await openHttpActionHarness();
  const { command, args } = stdioServerCommand();
  config = parseConfig(
    [
      'version: 1',
      'mcp_servers:',
      '  - name: docs',
      '    transport: stdio',
      `    command: ${JSON.stringify(command)}`,
      `    args: ${JSON.stringify(args)}`,
      "    env: { API_TOKEN: '{credential:docs-token}' }",
      '    expose_env_credentials: true',
      '    approval: none',
      '    timeout_ms: 20000',
      '',
    ].join('\n'),
  );
  upstreams = new McpUpstreams({
    gate: h.temp.journal,
    clock: h.temp.clock,
    secretsFor: async (name) => {
      const server = config.mcpServers.get(name);
      if (server === undefined) throw new Error(`no server ${name}`);
      return withServerSecrets(h.vault, server, (opened) => mcpSecrets(server, opened));
    },
  });
  deps = { ...h.executorDeps(config), upstreams };
  const binary = randomBytes(360 * 1024);
  for (let i = 0; i + 1 < binary.length; i += 64) {
    binary[i] = 0x78;
    binary[i + 1] = 0x9c;
  }
  blob = binary.toString('base64');
}, 60_000);

afterAll(async () => {
  await upstreams.stopAll('broker_stopping');
  await h.dispose();
});

describe('when an upstream MCP reply is ~1 MB of hostile base64 (THREAT-MODEL 4: the agent cannot wedge others)', () => {
  it('the scrub gives the event loop turns: no gap between ticks comes near the scrub’s own duration', async () => {
    // A first call starts the child and compiles what every call runs: the attack is a stream of calls.
    const warm = await executeMcpAction(deps, { server: 'docs', tool: 'echo', arguments: { blob: 'warm' } });
    expect(warm.envelope.error).toBeUndefined();

    // Three hostile calls one after another: a gap of one (a GC pause, the box descheduling this process) is not the
    // scrub's; the median of their largest gaps is.
    const watched = [];
    for (let call = 0; call < 3; call++)
      watched.push(
        await watchEventLoop(() => executeMcpAction(deps, { server: 'docs', tool: 'echo', arguments: { blob } })),
      );
    const median = (values: number[]): number => values.sort((x, y) => x - y)[1]!;
    const maxGapMs = median(watched.map((w) => w.maxGapMs));
    const tookMs = median(watched.map((w) => w.tookMs));
    const value = watched[2]!.value;
    expect(watched.map((w) => w.value.envelope.error)).toEqual([undefined, undefined, undefined]);
    expect(value.result?.truncated).toBe(false);

    // What the same reply costs when scrubbed at once: the upstream's reply as deliver() serializes it.
    const reply = {
      content: [{ type: 'text', text: JSON.stringify({ blob }) }],
      structuredContent: { blob },
      isError: false,
    };
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token: canary }));
    let scrubbed = '';
    const sync = await watchEventLoop(() => {
      scrubbed = scrubber.scrub(Buffer.from(JSON.stringify(reply), 'utf8')).bytes.toString('utf8');
      return Promise.resolve();
    });
    // The call delivered what the sync scrub gives: past its decoder budget the scrubber redacts what it could not
    // read, which here breaks the JSON, so the agent gets the scrubbed text as one block (deliver()).
    expect(scrubbed).toContain('[REDACTED]');
    expect(value.result?.content).toEqual([{ type: 'text', text: scrubbed }]);
    expect(sync.tookMs).toBeGreaterThan(200);
    // The calls did the whole scrub (the median took at least half the sync one, the rest spread in slices)...
    expect(tookMs).toBeGreaterThan(sync.tookMs / 2);
    // ...and no one waited for it: the gaps between ticks were slices, far below the scrub's own duration.
    expect(maxGapMs).toBeLessThan(sync.tookMs / 2);
  }, 60_000);
});
