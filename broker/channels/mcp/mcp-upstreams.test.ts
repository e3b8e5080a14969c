import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent, NewEvent } from '../../contract/index.js';
import type { DispatchGate } from '../../ports/index.js';
import { createCapturedLogger } from '../../testing/captured-logger.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { secretScrubber } from '../../actions/secret-scrubber.js';
import {
  escapedLines,
  startUpstreamHttpMcp,
  stdioServerCommand,
  type UpstreamHttpMcp,
} from '../../testing/upstream-mcp/index.js';
import {
  McpUpstreams,
  type McpChannelReport,
  type McpLimits,
  type McpSecrets,
  type McpServerSpec,
  type McpUpstreamsOptions,
} from './index.js';
import { mcpAuthorized, succeeded } from '../../testing/action-paths.js';

const canary = 'pst-canary-7f3a9c21-do-not-leak';
const fingerprint = `sha256:${'f1'.repeat(32)}`;

let temp: TempJournal;
let reader: Database.Database;
let markerFile: string;
let actionCount = 0;
const upstreams: McpUpstreams[] = [];
const httpServers: UpstreamHttpMcp[] = [];

beforeAll(async () => {
  // Held observations commit only when something commits them (the channel does, at the end of its exchange).
  temp = await openTempJournal({ laterFlushMs: 60_000 });
  reader = new Database(temp.path, { readonly: true, fileMustExist: true });
  markerFile = join(temp.dir.path, 'marker.jsonl');
  writeFileSync(markerFile, '');
});
afterEach(async () => {
  await Promise.all(upstreams.splice(0).map((u) => u.stopAll('broker_stopping')));
  await Promise.all(httpServers.splice(0).map((s) => s.close()));
  writeFileSync(markerFile, '');
});
afterAll(async () => {
  reader.close();
  await temp.dispose();
});

/** DISPATCH_STARTED rows of an action, read through a second SQLite connection: only what is committed. */
function durableDispatches(actionId: string): number {
  const row = reader
    .prepare(`SELECT count(*) AS n FROM events WHERE kind = 'DISPATCH_STARTED' AND action_id = ?`)
    .get(actionId) as { n: number };
  return row.n;
}

/** The kinds of each commit made while `work` runs, one list per commit (the action's admission is made before it). */
async function commitsDuring(work: () => Promise<unknown>): Promise<string[][]> {
  const commits: string[][] = [];
  const stop = temp.journal.onCommit((commit) => commits.push([...commit.kinds]));
  try {
    await work();
  } finally {
    stop();
  }
  return commits;
}

/** An action's event kinds as committed, read through the second connection. */
function durableKinds(actionId: string): string[] {
  return reader
    .prepare(`SELECT kind FROM events WHERE action_id = ? ORDER BY seq`)
    .all(actionId)
    .map((row) => (row as { kind: string }).kind);
}

function markerLines(): Array<{ tool: string; pid: number }> {
  const text = readFileSync(markerFile, 'utf8');
  return text === ''
    ? []
    : text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { tool: string; pid: number });
}

/** A new action, admitted as the executor would, so the journal accepts its DISPATCH_STARTED. */
async function admit(): Promise<string> {
  actionCount += 1;
  const id = `act_${String(actionCount).padStart(26, '0')}`;
  const events = mcpAuthorized(id, {
    lane: 'mcp-test',
    target: 'mcp:files.echo',
    fingerprint,
    injectionMode: 'mcp_env',
  });
  for (const event of events) await temp.journal.append(event);
  return id;
}

/**
 * The real journal as the dispatch gate. `atBoundary` runs after DISPATCH_STARTED is durable and before the
 * channel may write the request (beginDispatch has not resolved yet): the place to look at the upstream.
 */
class JournalGate implements DispatchGate {
  atBoundary: ((actionId: string) => Promise<void>) | undefined;
  refuse = false;

  async beginDispatch(...args: Parameters<DispatchGate['beginDispatch']>): Promise<{ event: JournalEvent }> {
    if (this.refuse) throw new Error('journal not writable');
    const appended = await temp.journal.beginDispatch(...args);
    await this.atBoundary?.(args[0]);
    return appended;
  }

  append(event: NewEvent): Promise<{ event: JournalEvent }> {
    return temp.journal.append(event);
  }

  appendLater(event: NewEvent): Promise<{ event: JournalEvent }> {
    return temp.journal.appendLater(event);
  }

  commitHeld(): void {
    temp.journal.commitHeld();
  }
}

function kinds(actionId: string): string[] {
  return temp.journal
    .subjectEvents(actionId)
    .map((e) => e.kind)
    .filter((k) => !['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'CREDENTIAL_AUTHORIZED'].includes(k));
}

function payloadOf(actionId: string, kind: string): unknown {
  return temp.journal.subjectEvents(actionId).find((e) => e.kind === kind)?.payload;
}

const secrets = (env: Record<string, string> = {}, headers: Record<string, string> = {}): McpSecrets => ({
  env,
  headers,
  secrets: [Buffer.from(canary)],
});

function stdioSpec(flags: string[] = [], extra: Partial<McpServerSpec> = {}): McpServerSpec {
  const { command, args } = stdioServerCommand(['--marker-file', markerFile, ...flags]);
  return { name: 'files', transport: 'stdio', command, args, warmMs: 60_000, ...extra };
}

function registry(
  gate: DispatchGate,
  options: {
    limits?: Partial<McpLimits>;
    env?: Record<string, string>;
    headers?: Record<string, string>;
    stderrScrubber?: McpUpstreamsOptions['stderrScrubber'];
  } = {},
) {
  const { logger, lines } = createCapturedLogger();
  const starts: string[] = [];
  const u = new McpUpstreams({
    gate,
    logger,
    clock: temp.clock,
    limits: options.limits ?? {},
    ...(options.stderrScrubber === undefined ? {} : { stderrScrubber: options.stderrScrubber }),
    secretsFor: (server) => {
      starts.push(server);
      return Promise.resolve(secrets(options.env ?? { API_TOKEN: canary }, options.headers ?? {}));
    },
  });
  upstreams.push(u);
  return { u, lines, starts };
}

async function call(
  u: McpUpstreams,
  spec: McpServerSpec,
  tool: string,
  args: Record<string, unknown> = {},
  extra: { deadlineMs?: number; signal?: AbortSignal; actionId?: string; ride?: boolean } = {},
): Promise<{ id: string; report: McpChannelReport }> {
  const id = extra.actionId ?? (await admit());
  const report = await u.call(spec, {
    actionId: id,
    attempt: 1,
    tool,
    arguments: args,
    deadlineMs: extra.deadlineMs ?? 20_000,
    ...(extra.signal === undefined ? {} : { signal: extra.signal }),
    ...(extra.ride === undefined ? {} : { observationsRideWithSettlement: extra.ride }),
  });
  return { id, report };
}

function textOf(report: McpChannelReport): string {
  const result = report.result;
  if (result === undefined || !('content' in result)) return '';
  return (result.content as Array<{ text?: string }>).map((c) => c.text ?? '').join('');
}

/** Waits for a condition with a deadline (events, not sleeps: checked at each turn of the loop). */
async function until(condition: () => boolean, what: string, deadlineMs = 10_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('when a stdio server is called', () => {
  it('starts it lazily, passes the secret through env only, and writes the call only after DISPATCH_STARTED is durable', async () => {
    const gate = new JournalGate();
    const { u, starts } = registry(gate);
    const spec = stdioSpec();
    expect(u.status()).toEqual([]);
    let seenAtBoundary: { durable: number; marker: number } | undefined;
    gate.atBoundary = async (actionId) => {
      // A tools/list on the same stdin after the boundary row: had the call been written already, it would be ahead
      // of this request on the pipe and the server would have logged it before answering.
      await u.listTools(spec);
      seenAtBoundary = { durable: durableDispatches(actionId), marker: markerLines().length };
    };
    const { id, report } = await call(u, spec, 'env', { name: 'API_TOKEN' });
    expect(seenAtBoundary).toEqual({ durable: 1, marker: 0 });
    expect(markerLines().map((l) => l.tool)).toEqual(['env']);
    expect(starts).toEqual(['files']);
    expect(report).toMatchObject({
      dispatchStarted: true,
      handedToTransport: true,
      requestComplete: true,
      transportBroken: false,
      connection: 'fresh',
      reply: { kind: 'result' },
    });
    expect(JSON.parse(textOf(report))).toEqual({ name: 'API_TOKEN', value: canary });
    expect(kinds(id)).toEqual([
      'DISPATCH_STARTED',
      'REQUEST_SENT',
      'REMOTE_RESPONSE_STARTED',
      'REMOTE_RESPONSE_COMPLETE',
    ]);
    expect(payloadOf(id, 'REQUEST_SENT')).toEqual({ attempt: 1, request_complete: true });
    expect(payloadOf(id, 'REMOTE_RESPONSE_COMPLETE')).toEqual({ attempt: 1, digest: report.replyDigest });
    expect(payloadOf(id, 'DISPATCH_STARTED')).toMatchObject({
      connection: 'fresh',
      connection_id: report.connectionId,
    });
  });

  it('holds its observations and commits them together once the reply is in: one commit, none of them waiting on another', async () => {
    const { u } = registry(new JournalGate());
    const id = await admit();
    const commits = await commitsDuring(() => call(u, stdioSpec(), 'echo', { text: 'held' }, { actionId: id }));
    expect(commits).toEqual([
      ['DISPATCH_STARTED'],
      ['REQUEST_SENT', 'REMOTE_RESPONSE_STARTED', 'REMOTE_RESPONSE_COMPLETE'],
    ]);
  });

  it('asked to, hands its observations over held: they commit with the settlement appended withHeld, in one commit', async () => {
    const { u } = registry(new JournalGate());
    const id = await admit();
    const commits = await commitsDuring(async () => {
      const { report } = await call(u, stdioSpec(), 'echo', { text: 'held' }, { actionId: id, ride: true });
      expect(durableKinds(id)).not.toContain('REQUEST_SENT');
      expect(report.observations).toBeDefined();
      const settlement: NewEvent = {
        kind: 'OUTCOME_RECORDED',
        action_id: id,
        payload: { attempt: 1 },
        classification: succeeded,
      };
      await temp.journal.append(settlement, undefined, { withHeld: true });
      expect(await report.observations?.settled()).toBeUndefined();
    });
    expect(commits).toEqual([
      ['DISPATCH_STARTED'],
      ['REQUEST_SENT', 'REMOTE_RESPONSE_STARTED', 'REMOTE_RESPONSE_COMPLETE', 'OUTCOME_RECORDED'],
    ]);
  });

  it('asked to, but the caller cancelled: commits its observations itself (the record appends a caller event first)', async () => {
    const { u } = registry(new JournalGate());
    const id = await admit();
    const cancel = new AbortController();
    const running = call(u, stdioSpec(), 'hang', {}, { actionId: id, ride: true, signal: cancel.signal });
    await until(() => markerLines().some((l) => l.tool === 'hang'), 'the call to reach the server');
    cancel.abort();
    const { report } = await running;
    expect(report).toMatchObject({ dispatchStarted: true, caller: 'cancelled' });
    expect(report.observations).toBeUndefined();
    expect(durableKinds(id)).toContain('REQUEST_SENT');
  });

  it('gives the child a minimal env: a fixed PATH, none of the broker’s own variables', async () => {
    process.env['POSTERN_TEST_BROKER_SECRET'] = 'broker-only';
    try {
      const { u } = registry(new JournalGate());
      const spec = stdioSpec();
      const path = await call(u, spec, 'env', { name: 'PATH' });
      const own = await call(u, spec, 'env', { name: 'POSTERN_TEST_BROKER_SECRET' });
      expect(JSON.parse(textOf(path.report))).toMatchObject({ value: '/usr/local/bin:/usr/bin:/bin' });
      expect(JSON.parse(textOf(own.report))).toMatchObject({ value: null });
    } finally {
      delete process.env['POSTERN_TEST_BROKER_SECRET'];
    }
  });

  it('reuses the warm child for the next call (same pid, connection reused)', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    const first = await call(u, spec, 'count');
    const second = await call(u, spec, 'count');
    const a = JSON.parse(textOf(first.report)) as { calls: number; pid: number };
    const b = JSON.parse(textOf(second.report)) as { calls: number; pid: number };
    expect(b).toEqual({ calls: a.calls + 1, pid: a.pid });
    expect(second.report.connection).toBe('reused');
    expect(u.status()).toMatchObject([{ server: 'files', state: 'ready', pid: a.pid, restarts: 0 }]);
  });

  it('a tool that answers isError is a tool_error reply; a JSON-RPC error is a protocol_error with its code', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    const failed = await call(u, spec, 'fail', { message: 'nope' });
    expect(failed.report.reply).toEqual({ kind: 'tool_error' });
    const unknown = await call(u, spec, 'no_such_tool');
    // The SDK answers an unknown tool either as a JSON-RPC error or as an isError result, by version: both are replies.
    expect(unknown.report.reply?.kind).toMatch(/^(protocol_error|tool_error)$/);
    expect(unknown.report.transportBroken).toBe(false);
  });
});

describe('when the child misbehaves after the request was written', () => {
  it('dies after reading it: transport broken, CONNECTION_LOST; then backoff refuses at setup until the clock passes', async () => {
    writeFileSync(markerFile, '');
    const { u } = registry(new JournalGate(), { limits: { backoffMsBase: 5_000 } });
    const spec = stdioSpec();
    const died = await call(u, spec, 'die_after_read');
    expect(died.report).toMatchObject({ dispatchStarted: true, handedToTransport: true, transportBroken: true });
    expect(died.report.reply).toBeUndefined();
    expect(kinds(died.id)).toEqual(['DISPATCH_STARTED', 'REQUEST_SENT', 'CONNECTION_LOST']);
    await until(() => u.status()[0]?.state === 'backoff', 'backoff');
    expect(u.status()[0]).toMatchObject({ state: 'backoff', lastError: { code: 'exited', detail: 'exit_3' } });

    const refused = await call(u, spec, 'echo', { a: 1 });
    expect(refused.report).toMatchObject({
      dispatchStarted: false,
      setup: { failure: 'mcp_spawn', stage: 'spawn', attempts: 1 },
    });
    expect(refused.report.setup?.detail).toMatch(/may start again at \d{4}-/);
    expect(kinds(refused.id)).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(markerLines().map((l) => l.tool)).toEqual(['die_after_read']);

    temp.clock.advance(5_001);
    const again = await call(u, spec, 'echo', { a: 2 });
    expect(again.report).toMatchObject({ dispatchStarted: true, reply: { kind: 'result' }, connection: 'fresh' });
    expect(u.status()[0]).toMatchObject({ state: 'ready', restarts: 1 });
  });

  it('hangs: the operation deadline ends the wait, outcome facts say deadline and nothing else', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    // The deadline passing while the child still starts: stopped before the boundary, nothing journaled.
    const early = await call(u, spec, 'hang', {}, { deadlineMs: 1 });
    expect(early.report).toMatchObject({ dispatchStarted: false, stoppedBeforeDispatch: 'deadline' });
    expect(kinds(early.id)).toEqual([]);
    await until(() => u.status()[0]?.state === 'ready', 'the child, handed back, to be ready');
    const { id, report } = await call(u, spec, 'hang', {}, { deadlineMs: 300 });
    expect(report).toMatchObject({
      dispatchStarted: true,
      handedToTransport: true,
      transportBroken: false,
      operationDeadline: true,
    });
    expect(report.reply).toBeUndefined();
    expect(kinds(id)).toEqual(['DISPATCH_STARTED', 'REQUEST_SENT']);
  });

  it('floods: a reply over the bound closes the transport (broken), and Status says why', async () => {
    const { u } = registry(new JournalGate(), { limits: { replyBytesMax: 64 * 1024 } });
    const { id, report } = await call(u, stdioSpec(), 'flood', { bytes: 512 * 1024 });
    expect(report).toMatchObject({ dispatchStarted: true, transportBroken: true });
    expect(report.reply).toBeUndefined();
    expect(kinds(id)).toContain('CONNECTION_LOST');
    await until(() => u.status()[0]?.lastError !== undefined, 'status');
    expect(u.status()[0]?.lastError?.code).toBe('reply_too_large');
  });

  it('a caller who cancels after dispatch is recorded as such; the child lives on', async () => {
    const { u } = registry(new JournalGate());
    const cancel = new AbortController();
    const running = call(u, stdioSpec(), 'hang', {}, { signal: cancel.signal });
    await until(() => markerLines().some((l) => l.tool === 'hang'), 'the call to reach the server');
    cancel.abort();
    const { report } = await running;
    expect(report).toMatchObject({ dispatchStarted: true, caller: 'cancelled', transportBroken: false });
    expect(u.status()[0]?.state).toBe('ready');
  });
});

describe('when setup fails or is stopped before the boundary', () => {
  it('a program that does not exist: mcp_spawn at spawn (ENOENT), nothing dispatched', async () => {
    const { u } = registry(new JournalGate());
    const { id, report } = await call(u, stdioSpec([], { command: '/nonexistent/postern-mcp' }), 'echo');
    expect(report).toMatchObject({
      dispatchStarted: false,
      handedToTransport: false,
      setup: { failure: 'mcp_spawn', stage: 'spawn', detail: 'ENOENT' },
    });
    expect(kinds(id)).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(payloadOf(id, 'SETUP_ATTEMPT_FAILED')).toEqual({ attempt: 1, stage: 'spawn', detail: 'ENOENT' });
  });

  it('a child that exits before initialize: mcp_initialize at initialize (exit_1), and Status shows the failure', async () => {
    const { u } = registry(new JournalGate());
    const { report } = await call(u, stdioSpec(['--crash-at-start']), 'echo');
    expect(report).toMatchObject({ dispatchStarted: false, setup: { failure: 'mcp_initialize', stage: 'initialize' } });
    expect(report.setup?.detail).toBe('exit_1');
    expect(u.status()[0]).toMatchObject({ state: 'backoff', lastError: { code: 'initialize_failed' } });
  });

  it('a caller already gone: stoppedBeforeDispatch cancelled, no child started, nothing journaled', async () => {
    const { u, starts } = registry(new JournalGate());
    const { id, report } = await call(u, stdioSpec(), 'echo', {}, { signal: AbortSignal.abort() });
    expect(report).toMatchObject({ dispatchStarted: false, stoppedBeforeDispatch: 'cancelled' });
    expect(starts).toEqual([]);
    expect(kinds(id)).toEqual([]);
  });

  it('a journal that refuses DISPATCH_STARTED: nothing is written to the child', async () => {
    writeFileSync(markerFile, '');
    const gate = new JournalGate();
    gate.refuse = true;
    const { u } = registry(gate);
    const { report } = await call(u, stdioSpec(), 'echo');
    expect(report).toMatchObject({ dispatchStarted: false, handedToTransport: false });
    expect(report.journalFailed).toBeInstanceOf(Error);
    // A round trip on the same child: a write before the refusal would be ahead of it.
    await u.listTools(stdioSpec());
    expect(markerLines()).toEqual([]);
  });
});

describe('children are bounded, kept warm, and stopped', () => {
  it('warm_ms 0 stops the child after each call', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec([], { warmMs: 0 });
    const first = await call(u, spec, 'count');
    const { pid } = JSON.parse(textOf(first.report)) as { pid: number };
    await until(() => !alive(pid), 'the child to exit');
    expect(u.status()[0]).toMatchObject({ state: 'idle', restarts: 0 });
    const second = await call(u, spec, 'count');
    expect(JSON.parse(textOf(second.report))).toMatchObject({ calls: 1 });
  });

  it('childrenMax: a new server stops the least recently used idle one', async () => {
    const { u } = registry(new JournalGate(), { limits: { childrenMax: 1 } });
    const a = await call(u, stdioSpec(), 'count');
    const { pid } = JSON.parse(textOf(a.report)) as { pid: number };
    const b = await call(u, { ...stdioSpec(), name: 'other' }, 'count');
    expect(b.report.reply).toEqual({ kind: 'result' });
    await until(() => !alive(pid), 'the least recently used child to exit');
    expect(u.status().map((s) => [s.server, s.state])).toEqual([
      ['files', 'idle'],
      ['other', 'ready'],
    ]);
  });

  it('stopAll (vault locked) kills the children; a call in flight sees its transport go', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    const first = await call(u, spec, 'count');
    const { pid } = JSON.parse(textOf(first.report)) as { pid: number };
    writeFileSync(markerFile, '');
    const hanging = call(u, spec, 'hang');
    await until(() => markerLines().length === 1, 'the hang call to reach the server');
    await u.stopAll('vault_locked');
    expect(alive(pid)).toBe(false);
    const { report } = await hanging;
    expect(report).toMatchObject({ dispatchStarted: true, transportBroken: true });
    expect(u.status()[0]).toMatchObject({ state: 'idle' });
    // Not stopping for good: the next call starts it again.
    expect((await call(u, spec, 'echo')).report.reply).toEqual({ kind: 'result' });
  });
});

describe('stderr reaches the log, scrubbed', () => {
  it('a child that prints its secret to stderr: the log has the line with [redacted], never the secret', async () => {
    const { u, lines } = registry(new JournalGate());
    await call(u, stdioSpec(['--stderr-env', 'API_TOKEN']), 'echo');
    await until(() => lines.some((l) => l.includes('API_TOKEN=')), 'the stderr line in the log');
    expect(lines.find((l) => l.includes('API_TOKEN='))).toContain('API_TOKEN=[redacted]');
    expect(lines.join('\n')).not.toContain(canary);
    expect(lines.join('\n')).not.toContain(Buffer.from(canary).toString('base64').slice(0, 20));
  });

  describe('when the child escapes the secret (HTML references, \\u escapes nested in JSON)', () => {
    // What broker-runtime's startUpstreams passes: the scrubber answers get, over the secrets' text.
    const fullScrubber: McpUpstreamsOptions['stderrScrubber'] = (secrets) => {
      const scrubber = secretScrubber(secrets.map((s) => s.toString('utf8')));
      return { lookaheadBytes: scrubber.lookaheadBytes, scrub: (line, limit) => scrubber.scrub(line, limit).bytes };
    };
    const escapedStderr = async (stderrScrubber?: McpUpstreamsOptions['stderrScrubber']): Promise<string[]> => {
      const { u, lines } = registry(new JournalGate(), stderrScrubber === undefined ? {} : { stderrScrubber });
      await call(u, stdioSpec(['--stderr-env-escaped', 'API_TOKEN']), 'echo');
      const logged = () => lines.filter((l) => l.includes('API_TOKEN.'));
      await until(() => logged().length === 2, 'both escaped stderr lines in the log');
      return logged().map((l) => (JSON.parse(l) as { msg: string }).msg);
    };

    it('the exact forms alone let both through (the attack works without the full scrubber)', async () => {
      const messages = await escapedStderr();
      expect(messages.join('\n')).toContain(escapedLines('API_TOKEN', canary).split('\n')[0]);
      expect(secretScrubber([canary]).ranges(Buffer.from(messages.join('\n'))).length).toBe(2);
    });

    it('with the full scrubber, no form of the secret is left in either line', async () => {
      const messages = await escapedStderr(fullScrubber);
      expect(messages).toEqual([
        'mcp stderr: API_TOKEN.html=[REDACTED]',
        `mcp stderr: API_TOKEN.json=${JSON.stringify('{"v":"[REDACTED]"}')}`,
      ]);
      expect(secretScrubber([canary]).ranges(Buffer.from(messages.join('\n')))).toEqual([]);
    });
  });
});

describe('tools/list and list_changed', () => {
  it('lists with schemas, caches, and forwards tools/list_changed (the next list has the new tool)', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    const tools = await u.listTools(spec);
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'env', 'hang', 'add_tool']));
    expect(tools.find((t) => t.name === 'env')?.inputSchema).toMatchObject({ type: 'object' });
    expect(tools.map((t) => t.name)).not.toContain('extra');
    const changed: string[] = [];
    u.onToolsChanged((server) => changed.push(server));
    await call(u, spec, 'add_tool');
    await until(() => changed.length > 0, 'tools/list_changed');
    expect(changed[0]).toBe('files');
    expect((await u.listTools(spec)).map((t) => t.name)).toContain('extra');
  });
});

describe('when a streamable_http server is called', () => {
  const bearer = `Bearer ${canary}`;
  async function server(): Promise<UpstreamHttpMcp> {
    const s = await startUpstreamHttpMcp({ bearer: canary });
    httpServers.push(s);
    return s;
  }
  const httpSpec = (s: UpstreamHttpMcp): McpServerSpec => ({
    name: 'remote',
    transport: 'streamable_http',
    url: s.url,
    warmMs: 60_000,
  });

  it('injects the header, and the POST carrying the call leaves only after DISPATCH_STARTED is durable', async () => {
    const s = await server();
    const gate = new JournalGate();
    const { u } = registry(gate, { headers: { authorization: bearer } });
    let seenAtBoundary: { durable: number; calls: number } | undefined;
    gate.atBoundary = (actionId) => {
      seenAtBoundary = { durable: durableDispatches(actionId), calls: s.calls() };
      return Promise.resolve();
    };
    const { id, report } = await call(u, httpSpec(s), 'echo', { hello: 'world' });
    expect(seenAtBoundary).toEqual({ durable: 1, calls: 0 });
    expect(s.calls()).toBe(1);
    expect(s.received().map((r) => r.authorization)).toEqual([bearer]);
    expect(report).toMatchObject({
      dispatchStarted: true,
      handedToTransport: true,
      requestComplete: true,
      transportBroken: false,
      reply: { kind: 'result' },
      httpStatus: 200,
    });
    expect(JSON.parse(textOf(report))).toEqual({ hello: 'world' });
    expect(kinds(id)).toEqual([
      'DISPATCH_STARTED',
      'REQUEST_SENT',
      'REMOTE_RESPONSE_STARTED',
      'REMOTE_RESPONSE_COMPLETE',
    ]);
    expect(payloadOf(id, 'REMOTE_RESPONSE_STARTED')).toEqual({ attempt: 1, status: 200 });
  });

  it('a session the remote forgot (404 on the call’s POST) is dropped: that call stays lost, the next one starts anew', async () => {
    const s = await server();
    const { u } = registry(new JournalGate(), { headers: { authorization: bearer } });
    const first = await call(u, httpSpec(s), 'echo', { n: 1 });
    expect(first.report.reply).toEqual({ kind: 'result' });
    await s.forgetSessions();
    const second = await call(u, httpSpec(s), 'echo', { n: 2 });
    expect(second.report).toMatchObject({
      dispatchStarted: true,
      httpStatus: 404,
      connectionId: first.report.connectionId,
    });
    expect(second.report.reply).toBeUndefined();
    const third = await call(u, httpSpec(s), 'echo', { n: 3 });
    expect(third.report).toMatchObject({ reply: { kind: 'result' }, connection: 'fresh' });
    expect(third.report.connectionId).not.toBe(first.report.connectionId);
    expect(JSON.parse(textOf(third.report))).toEqual({ n: 3 });
  });

  it('a refused connect for the call’s own connection is setup (connect_refused), never after the boundary', async () => {
    const s = await server();
    const { u } = registry(new JournalGate(), { headers: { authorization: bearer } });
    const spec = httpSpec(s);
    expect((await call(u, spec, 'echo')).report.reply).toEqual({ kind: 'result' });
    s.refuseNext();
    const { id, report } = await call(u, spec, 'echo');
    expect(report).toMatchObject({
      dispatchStarted: false,
      setup: { failure: 'connect_refused', stage: 'connect' },
    });
    expect(kinds(id)).toEqual(['SETUP_ATTEMPT_FAILED']);
    expect(s.calls()).toBe(1);
  });

  it('a wrong credential fails initialize (http_401): not dispatched', async () => {
    const s = await server();
    const { u } = registry(new JournalGate(), { headers: { authorization: 'Bearer wrong-token' } });
    const { report } = await call(u, httpSpec(s), 'echo');
    expect(report).toMatchObject({
      dispatchStarted: false,
      setup: { failure: 'mcp_initialize', stage: 'initialize', detail: 'http_401' },
    });
    expect(s.calls()).toBe(0);
  });

  it('a server that drops the connection after reading the call: transport broken after dispatch', async () => {
    const s = await server();
    const { u } = registry(new JournalGate(), { headers: { authorization: bearer } });
    const { id, report } = await call(u, httpSpec(s), 'drop_after_read');
    expect(report).toMatchObject({ dispatchStarted: true, handedToTransport: true, transportBroken: true });
    expect(report.reply).toBeUndefined();
    expect(kinds(id)).toContain('CONNECTION_LOST');
    expect(s.calls()).toBe(1);
  });
  describe('when the server floods its GET stream (server-initiated messages)', () => {
    const streamLimits = { replyBytesMax: 64 * 1024, serverStreamBytesPerSecond: 1 };
    /** A session whose GET stream is open, as the server sees it; the call that opened it worked. */
    async function openStream(limits: Partial<McpLimits>) {
      const s = await server();
      const { u, lines } = registry(new JournalGate(), { headers: { authorization: bearer }, limits });
      expect((await call(u, httpSpec(s), 'echo')).report.reply).toEqual({ kind: 'result' });
      await until(() => s.openStreams() === 1, 'the GET stream open at the server');
      return { s, u, lines };
    }

    it.each([
      ['one message over replyBytesMax', 1, 64 * 1024 + 1, 'stream_message_bytes'],
      ['many small messages faster than the rate', 200, 1024, 'stream_rate'],
    ])(
      '%s: the session is dropped (reply_too_large), the next call opens a new one',
      async (_, count, bytes, detail) => {
        const { s, u } = await openStream(streamLimits);
        expect(await s.push(bytes, count)).toBe(1);
        await until(() => u.status()[0]?.lastError !== undefined, 'the session closed, with why');
        expect(u.status()[0]?.state).not.toBe('ready');
        expect(u.status()[0]?.lastError).toMatchObject({ code: 'reply_too_large', detail });
        // Dropped, not buffered: the server sees the stream's connection gone.
        await until(() => s.openStreams() === 0, 'the GET stream closed at the server');
        expect((await call(u, httpSpec(s), 'echo')).report.reply).toEqual({ kind: 'result' });
        const sessions = s.received().map((r) => r.sessionId);
        expect(sessions).toHaveLength(2);
        expect(sessions[1]).not.toBe(sessions[0]);
        expect(u.status()[0]).toMatchObject({ state: 'ready', restarts: 1 });
      },
    );

    it('messages under both bounds are taken and the session lives on', async () => {
      const { s, u } = await openStream({ replyBytesMax: 64 * 1024 });
      expect(await s.push(8 * 1024, 4)).toBe(1);
      expect((await call(u, httpSpec(s), 'echo')).report.reply).toEqual({ kind: 'result' });
      expect(s.openStreams()).toBe(1);
      expect(new Set(s.received().map((r) => r.sessionId)).size).toBe(1);
      expect(u.status()[0]?.lastError).toBeUndefined();
    });
  });
});

describe('a stdio server started through a wrapper script', () => {
  /** Gone: no such process, or a zombie (killed, waiting for whoever reaps orphans). */
  function gone(pid: number): boolean {
    try {
      return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return true;
    }
  }

  it('close stops the whole group: a grandchild that ignores SIGTERM (and holds the secret) is killed after the grace', async () => {
    const pidFile = join(temp.dir.path, 'grandchild.pid');
    writeFileSync(pidFile, '');
    const wrapper = join(temp.dir.path, 'wrapper.sh');
    const { command, args } = stdioServerCommand(['--marker-file', markerFile]);
    const quoted = [command, ...args].map((a) => `'${a}'`).join(' ');
    writeFileSync(
      wrapper,
      `#!/bin/sh\nsh -c 'trap "" TERM; echo $$ > "$1"; exec sleep 600' sh '${pidFile}' </dev/null >/dev/null 2>&1 &\n` +
        `${quoted}\n`,
      { mode: 0o755 },
    );
    const { u } = registry(new JournalGate(), { limits: { killGraceMs: 300 } });
    const spec: McpServerSpec = {
      name: 'wrapped',
      transport: 'stdio',
      command: '/bin/sh',
      args: [wrapper],
      warmMs: 60_000,
    };
    expect((await call(u, spec, 'echo', { text: 'hi' })).report.reply).toEqual({ kind: 'result' });
    await until(() => readFileSync(pidFile, 'utf8').endsWith('\n'), 'the grandchild to write its pid');
    const grandchild = Number(readFileSync(pidFile, 'utf8').trim());
    expect(readFileSync(`/proc/${grandchild}/environ`, 'utf8')).toContain(canary);
    await u.stopAll('vault_locked');
    await until(() => gone(grandchild), 'the grandchild to be killed');
  });
});

describe('when the credential changes between calls (rotated, rebound)', () => {
  it('a warm child started under the old one is replaced before the boundary; the reply is scrubbed of both', async () => {
    const oldValue = 'pst-old-secret-3b1d9e77';
    const newValue = 'pst-new-secret-c40a2f15';
    let current = oldValue;
    const u = new McpUpstreams({
      gate: new JournalGate(),
      clock: temp.clock,
      secretsFor: () => Promise.resolve({ env: { API_TOKEN: current }, headers: {}, secrets: [Buffer.from(current)] }),
    });
    upstreams.push(u);
    const spec = stdioSpec();
    const run = async (credentialKey: string) => {
      const seen: string[] = [];
      const report = await u.call(spec, {
        actionId: await admit(),
        attempt: 1,
        tool: 'env',
        arguments: { name: 'API_TOKEN' },
        deadlineMs: 20_000,
        credentialKey,
        onSessionSecrets: (secrets) => seen.push(...secrets.map((s) => s.toString('utf8'))),
      });
      return { report, seen, pid: markerLines().at(-1)?.pid ?? 0 };
    };
    const first = await run('v1');
    expect(JSON.parse(textOf(first.report))).toMatchObject({ value: oldValue });
    current = newValue;
    const second = await run('v2');
    expect(second.pid).not.toBe(first.pid);
    expect(JSON.parse(textOf(second.report))).toMatchObject({ value: newValue });
    await until(() => !alive(first.pid), 'the child holding the old credential to exit');
    // The executor scrubs with what it opened (the new value) and the serving session's own secrets.
    const scrubbed = (opened: string, seen: string[], report: McpChannelReport): string =>
      secretScrubber([opened, ...seen])
        .scrub(Buffer.from(textOf(report)))
        .bytes.toString('utf8');
    for (const [text, value] of [
      [scrubbed(oldValue, first.seen, first.report), oldValue],
      [scrubbed(newValue, second.seen, second.report), newValue],
    ] as const) {
      expect(text).not.toContain(oldValue);
      expect(text).not.toContain(newValue);
      expect(text).not.toContain(value);
    }
  });
});

describe('when the session is stopped between acquire and the boundary', () => {
  it('a vault lock just before beginDispatch: stoppedBeforeDispatch signal, no DISPATCH_STARTED, nothing written', async () => {
    const { u } = registry(new JournalGate());
    const spec = stdioSpec();
    await call(u, spec, 'count');
    writeFileSync(markerFile, '');
    const id = await admit();
    let stopped: Promise<void> | undefined;
    const report = await u.call(spec, {
      actionId: id,
      attempt: 1,
      tool: 'count',
      arguments: {},
      deadlineMs: 20_000,
      // Heard right before the boundary: the lock lands in the window between acquire and beginDispatch.
      onSessionSecrets: () => {
        stopped = u.stopAll('vault_locked');
      },
    });
    await stopped;
    expect(report).toMatchObject({ dispatchStarted: false, stoppedBeforeDispatch: 'signal', handedToTransport: false });
    expect(durableDispatches(id)).toBe(0);
    expect(markerLines()).toEqual([]);
  });

  it('a lock while DISPATCH_STARTED is being written: the call is lost unsent, no false REQUEST_SENT', async () => {
    const gate = new JournalGate();
    const { u } = registry(gate);
    const spec = stdioSpec();
    await call(u, spec, 'count');
    writeFileSync(markerFile, '');
    gate.atBoundary = () => u.stopAll('vault_locked');
    const { id, report } = await call(u, spec, 'count');
    expect(report).toMatchObject({ dispatchStarted: true, handedToTransport: false, requestComplete: false });
    expect(kinds(id)).not.toContain('REQUEST_SENT');
    expect(markerLines()).toEqual([]);
  });
});

describe('when stopAll comes while a child is still in initialize', () => {
  it('the starting child is gone when stopAll resolves; the call is not dispatched', async () => {
    const { u, lines } = registry(new JournalGate());
    const spec = stdioSpec(['--initialize-delay-ms', '60000']);
    const pending = call(u, spec, 'count');
    const delaying = () => lines.find((l) => l.includes('delaying initialize'));
    await until(() => delaying() !== undefined, 'the child to start its slow initialize');
    const { pid } = JSON.parse(delaying() ?? '{}') as { pid: number };
    expect(u.status()[0]).toMatchObject({ state: 'starting' });
    await u.stopAll('vault_locked');
    expect(alive(pid)).toBe(false);
    const { id, report } = await pending;
    expect(report.dispatchStarted).toBe(false);
    expect(durableDispatches(id)).toBe(0);
    expect(u.status()[0]).toMatchObject({ state: 'idle' });
  });
});
