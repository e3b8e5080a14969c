import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { posternBin } from './support/postern-process.js';

/**
 * The MCP inspector's CLI — a client nobody here wrote — lists and calls every tool through `postern mcp`
 * against a real daemon, as a person trying Postern by hand would. It runs from a directory outside the
 * checkout. Pinned to 0.17.5, the last inspector that runs on Node 20 (it warns about its engines field).
 */
const require = createRequire(import.meta.url);
const inspectorBin = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/inspector/package.json')),
  'cli',
  'build',
  'cli.js',
);
const canary = 'CANARY-inspector-7d1e';
const inspectorWaitMs = 30_000;
let running: BearerRouteDaemon;
let dataDir = '';
let elsewhere = '';

beforeAll(async () => {
  running = await startBearerRouteDaemon({
    prefix: 'pinsp-',
    canary,
    respond: (req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url, echoed: req.headers.authorization ?? null }));
    },
  });
  dataDir = running.dataDir;
  elsewhere = path.join(running.scratch, 'elsewhere');
  mkdirSync(elsewhere);
}, 60_000);

afterAll(async () => {
  await running?.stop();
});

/** One inspector run (`--cli`, stdio transport through the shim); its stdout is the method's JSON result. */
function inspector(method: string, args: string[] = []): Promise<Record<string, unknown>> {
  const argv = [
    inspectorBin,
    '--cli',
    process.execPath,
    posternBin,
    'mcp',
    '--data-dir',
    dataDir,
    '--method',
    method,
    ...args,
  ];
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      argv,
      { cwd: elsewhere, timeout: inspectorWaitMs, maxBuffer: 4 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null) {
          reject(new Error(`inspector ${method} failed: ${error.message}\n${stderr}`));
          return;
        }
        const start = stdout.indexOf('{');
        try {
          resolve(JSON.parse(stdout.slice(start)) as Record<string, unknown>);
        } catch {
          reject(new Error(`inspector ${method} printed no JSON: ${stdout}\n${stderr}`));
        }
      },
    );
  });
}

function call(
  tool: string,
  toolArgs: Record<string, string>,
): Promise<{
  structuredContent?: Record<string, unknown>;
  content?: Array<{ type: string; text?: string }>;
  isError?: boolean;
}> {
  return inspector('tools/call', [
    '--tool-name',
    tool,
    ...Object.entries(toolArgs).flatMap(([k, v]) => ['--tool-arg', `${k}=${v}`]),
  ]);
}

describe('the MCP inspector CLI, through postern mcp, from outside the checkout', () => {
  let actionId = '';

  it('lists the seven tools, each with an input and an output schema', async () => {
    const listed = (await inspector('tools/list')) as {
      tools: Array<{ name: string; inputSchema?: unknown; outputSchema?: unknown }>;
    };
    expect(listed.tools.map((t) => t.name).sort()).toEqual([
      'action_status',
      'cancel_action',
      'fetch_result',
      'http_request',
      'list_routes',
      'request_credential',
      'ssh_exec',
    ]);
    for (const tool of listed.tools) {
      expect(tool.inputSchema, tool.name).toBeDefined();
      expect(tool.outputSchema, tool.name).toBeDefined();
    }
  }, 60_000);

  it('calls list_routes and http_request; the response comes back scrubbed, in the text block too', async () => {
    const routes = await call('list_routes', {});
    expect(routes.structuredContent).toMatchObject({ routes: [{ name: 'docs' }] });
    const sent = await call('http_request', { route: 'docs', method: 'GET', path: '/inspected' });
    expect(sent.isError).not.toBe(true);
    expect(sent.structuredContent).toMatchObject({ effect: 'succeeded', response: { status: 200 } });
    actionId = String(sent.structuredContent?.['invocation_id'] ?? '');
    expect(actionId).toMatch(/^act_/);
    const text = sent.content?.[0]?.text ?? '';
    expect(text).toContain('/inspected');
    expect(JSON.stringify(sent)).not.toContain(canary);
  }, 60_000);

  it('calls action_status, fetch_result and cancel_action: each inspector run is another agent process, so it may not read that action', async () => {
    // A session is the agent process (pid + start time): the run that sent the action has exited, and another
    // process reading or cancelling it is refused without a word about the action's outcome.
    for (const tool of ['action_status', 'fetch_result', 'cancel_action']) {
      const refused = await call(tool, { action_id: actionId });
      expect(refused.isError, tool).toBe(true);
      expect(refused.structuredContent, tool).toMatchObject({
        invocation_id: null,
        error: { code: 'NOT_FOUND', field: 'action_id' },
      });
      expect((refused.structuredContent?.['error'] as Record<string, unknown>)['outcome'], tool).toBeUndefined();
    }
    // The same tools on an id of the right shape but no action: the same answer, so the refusal says nothing.
    const unknown = await call('action_status', { action_id: 'act_00000000000000000000000000' });
    expect(unknown.structuredContent).toMatchObject({ error: { code: 'NOT_FOUND', field: 'action_id' } });
  }, 90_000);

  it('calls ssh_exec and gets a coded refusal that names the field (no SSH host is configured)', async () => {
    const refused = await call('ssh_exec', { host: 'nowhere', command: 'uname -a' });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ error: { code: 'INVALID_TARGET', field: 'host' } });
  }, 60_000);
});
