import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentToolReply, ApprovalCard, BrokerApi, BrokerApiMethod } from '../broker/contract/index.js';
import { callOperator } from '../broker/cli/operator-commands.js';
import { parseConfig } from '../broker/config/load-config.js';
import { systemClock } from '../broker/ports/index.js';
import {
  startUpstreamHttpMcp,
  stdioServerCommand,
  type UpstreamHttpMcp,
} from '../broker/testing/upstream-mcp/index.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';
import { waitFor } from './support/drill.js';
import { decideAsPerson, unlockAsPerson } from './support/person-decision.js';
import { startDaemon, type RunningDaemon } from './support/postern-process.js';
import { canarySecret, findNeedles, findNeedlesInBytes, needlesFor } from './support/secret-forms.js';
import { UpstreamMcpAgent } from './support/upstream-mcp-agent.js';

/**
 * Upstream MCP servers behind a real daemon (issue #19): a real stdio MCP server (broker/testing/upstream-mcp) the
 * broker starts as its child with a vault credential in its environment, and a real streamable-HTTP MCP server on
 * 127.0.0.1 that wants a bearer token, both called by a real MCP SDK client through `postern mcp`. The SDK client
 * lists the tools first and so validates every structuredContent against the listed outputSchema: each call below
 * doubles as a schema check. The two canaries reach the upstreams and nothing the agent, the journal or the logs hold.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'poupmcp-'));
const dataDir = path.join(scratch, 'data');
const markerFile = path.join(scratch, 'marker.jsonl');
const passphraseFile = path.join(scratch, 'pass');
const passphrase = 'upstream mcp passphrase (test only)';
const filesCanary = canarySecret('CANARYfiles');
const remoteCanary = canarySecret('CANARYremote');
const needles = [
  ...needlesFor({ files: filesCanary }),
  ...needlesFor({ remote: remoteCanary, injected: `Bearer ${remoteCanary}` }),
];
/** Every text and structuredContent an agent received, searched for the canaries at the end. */
const agentSaw: string[] = [];
/** A crashed child is restarted after a backoff of 0.5 s (doubling); polled this often, for at most this long. */
const restartPollMs = 100;
const restartWaitMs = 10_000;
let remote: UpstreamHttpMcp;
let daemon: RunningDaemon | undefined;
let agent: UpstreamMcpAgent | undefined;

/**
 * `files`: none by default, its tools in lane `mcp:files`; `echo` needs a card and runs in lane `files-echo`, `count`
 * reads (no lane). `remote`: the bearer-guarded server.
 */
function configYaml(remoteUrl: string): string {
  const { command, args } = stdioServerCommand(['--stderr-env', 'API_TOKEN', '--marker-file', markerFile]);
  return [
    'version: 1',
    'agents:',
    '  session_approval: observe',
    'mcp_servers:',
    '  - name: files',
    '    transport: stdio',
    `    command: ${JSON.stringify(command)}`,
    `    args: ${JSON.stringify(args)}`,
    '    env:',
    "      API_TOKEN: '{credential:files-token}'",
    "      MODE: 'read-write'",
    // The person's acceptance that the child's environment (readable by the user's processes) holds the token.
    '    expose_env_credentials: true',
    '    approval: none',
    '    timeout_ms: 20000',
    '    tools:',
    "      - { match: 'echo', approval: per_call, lane: 'files-echo' }",
    // count only reads: no lane. Every other tool of the server shares its lane mcp:files (an unknown tool is a write).
    "      - { match: 'count', lane: null }",
    '  - name: remote',
    '    transport: streamable_http',
    `    url: ${remoteUrl}`,
    '    credential: remote-token',
    '    approval: none',
    '    timeout_ms: 20000',
    '',
  ].join('\n');
}

beforeAll(async () => {
  mkdirSync(dataDir, { mode: 0o700 });
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({ name: 'files-token', kind: 'bearer', secret: Buffer.from(filesCanary), bindings: ['files'] });
  await vault.add({ name: 'remote-token', kind: 'bearer', secret: Buffer.from(remoteCanary), bindings: ['remote'] });
  await vault.close();
  remote = await startUpstreamHttpMcp({ bearer: remoteCanary });
  writeFileSync(path.join(dataDir, 'postern.yaml'), configYaml(remote.url));
  await acceptConfigAsPerson(dataDir, passphraseFile);
  // At info the broker logs each line its children write to stderr: the scrubbing of those lines is under test.
  daemon = await startDaemon(dataDir, { env: { POSTERN_LOG_LEVEL: 'info' } });
  // Unlocked as a person does (not from a file, whose passphrase would prove no person for the decisions below).
  await unlockAsPerson(dataDir, passphrase);
  agent = await UpstreamMcpAgent.start(dataDir, 'upstream-mcp-agent');
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await daemon?.process.stop('SIGTERM');
  await remote?.close();
  // A stdio server the broker lost track of (a failed run) must not outlive the test: by pid, ours by its argv.
  for (const pid of serverProcesses()) process.kill(pid, 'SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

type Reply = Extract<AgentToolReply, { evidence: unknown }>;

/** One tool call as the agent makes it; its answer is kept for the canary search. */
async function call(name: string, args: Record<string, unknown> = {}): Promise<AgentToolReply> {
  if (agent === undefined) throw new Error('no agent');
  const result = await agent.call(name, args);
  for (const block of result.content) if (block.type === 'text') agentSaw.push(block.text);
  agentSaw.push(JSON.stringify(result.structuredContent));
  return result.structuredContent as AgentToolReply;
}

/** An answer that carries an action's envelope (a refusal before admission has none). */
function enveloped(reply: AgentToolReply): Reply {
  if (!('evidence' in reply)) throw new Error(`not an action's envelope: ${JSON.stringify(reply)}`);
  return reply;
}

const decide = <M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> =>
  decideAsPerson(dataDir, passphrase, method, input);

/** The marker file's lines: one per tools/call the stdio server read, written before the tool ran. */
function markers(): Array<{ tool: string; pid: number }> {
  if (!existsSync(markerFile)) return [];
  const lines = readFileSync(markerFile, 'utf8').split('\n').filter(Boolean);
  return lines.map((line) => JSON.parse(line) as { tool: string; pid: number });
}

async function cardsFor(count: number, tool: string): Promise<ApprovalCard[]> {
  const { cards } = await waitFor(
    () => callOperator(dataDir, 'approvals.list', {}),
    (r) => r.cards.filter((c) => c.command === tool && c.state === 'pending').length >= count,
    `${count} card(s) for ${tool}`,
  );
  return cards.filter((c) => c.command === tool).sort((a, b) => a.ticket - b.ticket);
}

/**
 * Calls `name` until it commits, bounded: a restarting stdio child refuses calls at setup during its backoff
 * (500 ms after the first crash), each refusal not_attempted with nothing sent.
 */
async function untilCommitted(name: string): Promise<Reply> {
  const deadline = Date.now() + restartWaitMs;
  for (;;) {
    const reply = enveloped(await call(name));
    if (reply.effect === 'succeeded') return reply;
    expect(reply).toMatchObject({
      evidence: { dispatch_started: false },
      error: { code: 'MCP_SPAWN_FAILED', outcome: 'not_attempted', phase: 'connection_setup' },
    });
    if (Date.now() > deadline) throw new Error(`${name} did not commit within ${restartWaitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, restartPollMs));
  }
}

function pidOf(reply: Reply): number {
  const pid = reply.mcp_result?.structured_content?.['pid'];
  if (typeof pid !== 'number') throw new Error(`no pid in ${JSON.stringify(reply.mcp_result)}`);
  return pid;
}

describe('when an agent lists tools through Postern', () => {
  it("shows each upstream's tools as <server>.<tool> with their input schemas, beside Postern's own", async () => {
    const tools = (await agent?.listTools()) ?? [];
    const names = tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['http_request', 'list_routes', 'request_credential']));
    expect(names).toEqual(expect.arrayContaining(['files.echo', 'files.env', 'files.die_after_read', 'files.count']));
    expect(names).toEqual(expect.arrayContaining(['remote.echo', 'remote.fail', 'remote.flood']));
    // Process-level tools exist only in the stdio server.
    expect(names).not.toContain('remote.env');
    const env = tools.find((t) => t.name === 'files.env');
    expect(env?.inputSchema).toMatchObject({ type: 'object', properties: { name: { type: 'string' } } });
    expect(env?.outputSchema).toMatchObject({ type: 'object' });
    // Listing started the stdio server: exactly one child, however many connections asked at once.
    expect(serverProcesses()).toHaveLength(1);
  });
});

describe('when a stdio server is given a credential in its environment', () => {
  it('the child has the secret, and the agent gets its reply with the secret redacted', async () => {
    const reply = enveloped(await call('files.env', { name: 'API_TOKEN' }));
    expect(reply.error).toBeUndefined();
    expect(reply.effect).toBe('succeeded');
    expect(reply.evidence.dispatch_started).toBe(true);
    const value = reply.mcp_result?.structured_content?.['value'];
    // The child echoed a value (null would mean no credential reached it); what the agent gets is not the canary.
    expect(typeof value).toBe('string');
    expect(value).not.toBe(filesCanary);
    expect(String(value).toLowerCase()).toContain('redacted');
    const mode = enveloped(await call('files.env', { name: 'MODE' }));
    expect(mode.mcp_result?.structured_content).toEqual({ name: 'MODE', value: 'read-write' });
    // The broker's own environment never reaches the child.
    const own = enveloped(await call('files.env', { name: 'POSTERN_LOG_LEVEL' }));
    expect(own.mcp_result?.structured_content).toEqual({ name: 'POSTERN_LOG_LEVEL', value: null });
  });

  it("is exposed to every process of the user (/proc/PID/environ), so the configuration refuses it unless a person's accepted file says expose_env_credentials: true", () => {
    // The attack, as a same-user agent makes it while the child is warm: read every process's environment.
    const exposedIn = serverProcesses().filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`).includes(filesCanary);
      } catch {
        return false;
      }
    });
    // The exposure the flag accepts is real (the card's note says no more than this): hence no default gives it.
    expect(exposedIn.length).toBeGreaterThan(0);
    const withoutTheFlag = configYaml(remote.url).replace('    expose_env_credentials: true\n', '');
    expect(withoutTheFlag).not.toContain('expose_env_credentials');
    expect(() => parseConfig(withoutTheFlag)).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'mcp_servers[0].env.API_TOKEN' }),
    );
  });
});

describe('when a tool rule asks for a card per call', () => {
  it('the call waits for a card showing server, tool and arguments as sent; approved, it commits', async () => {
    const pending = call('files.echo', { greeting: 'hello', n: 1 });
    const [card] = await cardsFor(1, 'echo');
    if (card === undefined) throw new Error('no card');
    expect(card).toMatchObject({ channel: 'mcp', target: 'mcp:files', command: 'echo', lane: 'files-echo' });
    expect(card.approval).toBe('per_call');
    expect(JSON.parse(card.body_preview ?? 'null')).toEqual({ greeting: 'hello', n: 1 });
    expect(markers().filter((m) => m.tool === 'echo')).toEqual([]);
    await decide('approvals.approve', { ticket: card.ticket });
    const reply = enveloped(await pending);
    expect(reply.effect).toBe('succeeded');
    expect(reply.mcp_result?.structured_content).toEqual({ greeting: 'hello', n: 1 });
    expect(markers().filter((m) => m.tool === 'echo')).toHaveLength(1);
  });

  it('rejected, the call is not_attempted and the server never received it', async () => {
    const before = markers().length;
    const pending = call('files.echo', { greeting: 'never sent' });
    const [card] = await cardsFor(1, 'echo');
    if (card === undefined) throw new Error('no card');
    await decide('approvals.reject', { ticket: card.ticket, reason: 'not this one' });
    const reply = enveloped(await pending);
    expect(reply.error).toMatchObject({ outcome: 'not_attempted' });
    expect(reply.evidence.dispatch_started).toBe(false);
    // A later ungated call reaches the server: the marker file is live, and the rejected call is not in it.
    await call('files.count');
    expect(
      markers()
        .slice(before)
        .map((m) => m.tool),
    ).toEqual(['count']);
  });

  it('two calls in its lane run in ticket order, even when the later one is approved first', async () => {
    const first = call('files.echo', { order: 'first' });
    const [a] = await cardsFor(1, 'echo');
    const second = call('files.echo', { order: 'second' });
    const [, b] = await cardsFor(2, 'echo');
    if (a === undefined || b === undefined) throw new Error('no cards');
    await decide('approvals.approve', { ticket: b.ticket });
    const waiting = await waitFor(
      () => callOperator(dataDir, 'approvals.list', {}),
      (r) => r.cards.some((c) => c.ticket === b.ticket && c.state === 'approved_waiting'),
      'the later ticket approved and waiting',
    );
    expect(waiting.cards.find((c) => c.ticket === b.ticket)?.waiting_for_ticket).toBe(a.ticket);
    const before = markers().length;
    await decide('approvals.approve', { ticket: a.ticket });
    expect(enveloped(await first).effect).toBe('succeeded');
    expect(enveloped(await second).effect).toBe('succeeded');
    expect(
      markers()
        .slice(before)
        .map((m) => m.tool),
    ).toEqual(['echo', 'echo']);
    expect(enveloped(await second).ticket).toBe(b.ticket);
  });
});

describe('when the stdio child dies after reading the request', () => {
  it('the outcome is unknown, never not_attempted; the call reached it, and the next call works again', async () => {
    const { pid: oldPid } = { pid: pidOf(enveloped(await call('files.count'))) };
    const reply = enveloped(await call('files.die_after_read'));
    expect(reply.evidence.dispatch_started).toBe(true);
    expect(reply.error?.outcome).toBe('unknown');
    expect(reply.effect).toBe('unknown_effect');
    expect(markers().at(-1)).toEqual({ tool: 'die_after_read', pid: oldPid });
    // Status shows the crash: what went wrong last (a closed code) on the files server.
    const crashed = (await callOperator(dataDir, 'status', {})).upstreams?.find((u) => u.server === 'files');
    expect(crashed?.last_error?.code).toBe('exited');
    // The child restarts with backoff: until then a call stops at setup, nothing sent (the registry's backoff).
    const again = await untilCommitted('files.count');
    expect(again.effect).toBe('succeeded');
    expect(pidOf(again)).not.toBe(oldPid);
    const restarted = (await callOperator(dataDir, 'status', {})).upstreams?.find((u) => u.server === 'files');
    expect(restarted).toMatchObject({ state: 'ready', pid: pidOf(again) });
    expect(restarted?.restarts).toBeGreaterThanOrEqual(1);
    // count reads (lane null) and went through; a write of the server shares mcp:files, which the unknown call heads:
    // it waits for a person, and runs once one attests the unknown outcome.
    const markersBefore = markers().length;
    const blocked = call('files.no_such_tool', {});
    await waitFor(
      () => callOperator(dataDir, 'approvals.list', {}),
      (r) => r.cards.some((c) => c.ticket === reply.ticket && c.state === 'blocked_head' && c.lane === 'mcp:files'),
      'the unknown call shown as the blocked head of mcp:files',
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(markers().slice(markersBefore)).toEqual([]);
    await decide('actions.attest', {
      action_id: reply.invocation_id,
      outcome: 'rejected',
      effect: 'no_effect',
      basis: 'the test server exits before it acts on die_after_read',
    });
    expect(enveloped(await blocked).evidence.dispatch_started).toBe(true);
    expect(
      markers()
        .slice(markersBefore)
        .map((m) => m.tool),
    ).toEqual(['no_such_tool']);
  });
});

describe('when a streamable_http server wants a bearer token', () => {
  it('the broker injects it: the call commits, the server saw the token, the agent never does', async () => {
    const reply = enveloped(await call('remote.echo', { hello: 'remote' }));
    expect(reply.effect).toBe('succeeded');
    expect(reply.mcp_result?.structured_content).toEqual({ hello: 'remote' });
    const received = remote.received().filter((r) => r.tool === 'echo');
    expect(received).toHaveLength(1);
    expect(received[0]?.authorization).toBe(`Bearer ${remoteCanary}`);
    expect(remote.unauthorized()).toBe(0);
  });

  it('with its listener closed, a call is not_attempted at connect and never reaches the server', async () => {
    const calls = remote.calls();
    remote.refuseNext();
    try {
      const reply = enveloped(await call('remote.echo', { hello: 'refused' }));
      expect(reply.evidence.dispatch_started).toBe(false);
      expect(reply.error).toMatchObject({ outcome: 'not_attempted', phase: 'connection_setup' });
      expect(remote.calls()).toBe(calls);
    } finally {
      await remote.resume();
    }
    const after = enveloped(await call('remote.echo', { hello: 'again' }));
    expect(after.effect).toBe('succeeded');
  });
});

describe('when the agent names something that is not there', () => {
  it('an unknown server is INVALID_TARGET, not_attempted', async () => {
    const reply = await call('nope.tool', {});
    expect(reply.error).toMatchObject({ code: 'INVALID_TARGET', outcome: 'not_attempted' });
  });

  it('a tool the server does not list is sent as named; the upstream answers it with a tool error', async () => {
    const before = markers().length;
    const reply = enveloped(await call('files.no_such_tool', {}));
    // The SDK's McpServer answers an unknown tool with isError: true, not with a JSON-RPC error: the tool "ran".
    expect(reply).toMatchObject({
      effect: 'failed',
      evidence: { dispatch_started: true },
      error: { code: 'MCP_TOOL_FAILED', outcome: 'committed', retry: 'never' },
      mcp_result: { server: 'files', tool: 'no_such_tool', is_error: true },
    });
    expect(
      markers()
        .slice(before)
        .map((m) => m.tool),
    ).toEqual(['no_such_tool']);
  });

  it("a name outside MCP's tool name characters is refused before admission", async () => {
    for (const name of ['files.bad name', 'files.', 'files.a.b']) {
      const reply = await call(name, {});
      expect(reply).toMatchObject({ invocation_id: null, error: { code: 'UNKNOWN_TOOL', outcome: 'not_attempted' } });
    }
  });
});

/** Every file under `dir`, relative path → bytes (journal, -wal, -shm, vault, logs). */
function dataFiles(dir: string, into = new Map<string, Buffer>()): Map<string, Buffer> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) dataFiles(full, into);
    else if (entry.isFile()) into.set(path.relative(dataDir, full), readFileSync(full));
  }
  return into;
}

describe('when the daemon stops', () => {
  let log = '';

  it('its stdio children are gone with it', async () => {
    const pid = pidOf(enveloped(await call('files.count')));
    const running = serverProcesses();
    await agent?.stop();
    agent = undefined;
    const stopping = daemon;
    if (stopping === undefined) throw new Error('no daemon');
    daemon = undefined;
    const exit = await stopping.process.stop('SIGTERM').catch((error: unknown) => error);
    log = `${stopping.process.stdout}\n${stopping.process.stderr}`;
    // One warm child per server: the one that answered was the only one running.
    expect(running).toEqual([pid]);
    // A child the broker still holds a pipe to keeps it from exiting: then the stop deadline kills it.
    expect(exit).toEqual({ code: 0, signal: null });
    expect(processAlive(pid)).toBe(false);
    expect(serverProcesses()).toEqual([]);
  }, 30_000);

  it('neither canary is in any answer, log line or data file', () => {
    expect(agentSaw.length).toBeGreaterThan(10);
    expect(findNeedles(agentSaw, needles)).toEqual([]);
    // The child wrote API_TOKEN=<canary> to its stderr at start; the broker logged the line (info) with it scrubbed.
    expect(log).toContain('API_TOKEN=');
    expect(findNeedles([log], needles)).toEqual([]);
    const files = dataFiles(dataDir);
    expect([...files.keys()]).toEqual(expect.arrayContaining(['journal.sqlite']));
    const leaks = [...files].flatMap(([file, bytes]) => findNeedlesInBytes(bytes, needles).map((l) => `${file}: ${l}`));
    expect(leaks).toEqual([]);
  });
});

/**
 * The pids of every process started from this test's stdio server command line (its marker file path is unique to
 * this run): a child the broker spawned but lost track of shows up here, and outlives the broker.
 */
function serverProcesses(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(markerFile)) pids.push(Number(entry));
    } catch {
      // Gone since the listing.
    }
  }
  return pids;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
