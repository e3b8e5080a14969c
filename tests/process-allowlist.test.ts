import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { WebSocket, type MessageEvent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSocketPath } from '../broker/agent/index.js';
import type { ApprovalCard, BrokerApi, BrokerApiMethod, SessionSummary } from '../broker/contract/index.js';
import { tcpListenerWithheld } from '../broker/core/index.js';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';
import { decideAsPerson, unlockAsPerson } from './support/person-decision.js';
import { repoRoot, runPostern, startDaemon, type RunningDaemon } from './support/postern-process.js';
import { stopForkedChild } from './support/forked-agent.js';

/**
 * The process allowlist against a real daemon (session approval `required`): agent processes run under a copy of the
 * node executable, and the daemon hashes /proc/<pid>/exe itself. An agent whose executable (path + sha256) is on the
 * list gets its session approved at open by the entry (no card) and its session-mode call goes through; its per_call
 * call still gets a card. The original node (another path) and the same copy after its bytes changed are not
 * matched. An agent can add no entry: the agent socket answers OPERATOR_ONLY, the control socket refuses its
 * process tree even with the passphrase.
 */
const prefix = 'palw-';
const passphrase = `${prefix} passphrase (test only)`;
const answerWaitMs = 30_000;
let scratch: string;
let dataDir: string;
let daemon: RunningDaemon;
let target: Server;
let nodeCopy: string;
const agents: Agent[] = [];

interface Agent {
  readonly child: ChildProcess;
  /** The agent's own pid (under a tracer, `child` is the tracer). */
  readonly pid: number | undefined;
  /** What the agent printed on stderr so far (with `start.stderr`), e.g. node's "Debugger listening on ws://…". */
  readonly stderr: () => string;
  /** With `start.connectOnRequest`: connects it to the agent socket; resolves once connected. */
  connect(): Promise<void>;
  exchange(message: Record<string, unknown>): Promise<unknown>;
}

interface AgentStart {
  /** Added to the test's environment. */
  readonly env?: Record<string, string>;
  /** A command the agent runs under (`strace …`): it execs `execPath script …` as its child. */
  readonly under?: readonly string[];
  /** Node options on its command line (not NODE_OPTIONS), after the test runner's own. */
  readonly execArgv?: readonly string[];
  /** Keep its stderr for the test (still copied to this process's stderr). */
  readonly stderr?: boolean;
  /** Resolve once it started, before it connects: `connect()` connects it. */
  readonly connectOnRequest?: boolean;
}

/**
 * Forks tests/support/allowlist-agent.mjs under `execPath` (or spawns it under `start.under`, the IPC channel passed
 * through); resolves once it connected to the agent socket (with `start.connectOnRequest`: once it started).
 */
async function startAgent(execPath: string, name: string, start: AgentStart = {}): Promise<Agent> {
  const script = path.join(repoRoot, 'tests', 'support', 'allowlist-agent.mjs');
  const options = {
    cwd: repoRoot,
    env: { ...process.env, ...start.env },
    stdio: ['ignore', 'inherit', start.stderr === true ? 'pipe' : 'inherit', 'ipc'] as (
      'ignore' | 'inherit' | 'pipe' | 'ipc'
    )[],
  };
  const args = [script, dataDir, name, ...(start.connectOnRequest === true ? ['on-request'] : [])];
  const execArgv = [...process.execArgv, ...(start.execArgv ?? [])];
  const [tracer, ...tracerArgs] = start.under ?? [];
  const child =
    tracer === undefined
      ? fork(script, args.slice(1), { ...options, execPath, execArgv })
      : spawn(tracer, [...tracerArgs, execPath, ...args], options);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
    process.stderr.write(text);
  });
  let next = 0;
  const waiting = new Map<number, (value: unknown) => void>();
  child.on('message', (message: { result?: { id: number; value: unknown } }) => {
    if (message.result === undefined) return;
    waiting.get(message.result.id)?.(message.result.value);
    waiting.delete(message.result.id);
  });
  const said = (what: 'ready' | 'waiting'): Promise<number | undefined> =>
    new Promise<number | undefined>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} not ${what}`)), answerWaitMs);
      child.once('message', (m: { ready?: boolean; waiting?: boolean; pid?: number; fatal?: string }) => {
        clearTimeout(timer);
        if (m[what] === true) resolve(m.pid);
        else reject(new Error(`${name}: ${m.fatal ?? 'failed'}`));
      });
      child.once('exit', (code) => reject(new Error(`${name} exited (${code})`)));
    });
  const pid = await said(start.connectOnRequest === true ? 'waiting' : 'ready');
  const agent: Agent = {
    child,
    pid,
    stderr: () => stderr,
    connect: async () => {
      const ready = said('ready');
      child.send({ connect: true });
      await ready;
    },
    exchange: (message) =>
      new Promise((resolve, reject) => {
        const id = (next += 1);
        const timer = setTimeout(() => reject(new Error(`${name}: no answer`)), answerWaitMs);
        waiting.set(id, (value) => {
          clearTimeout(timer);
          resolve(value);
        });
        const [kind, body] = Object.entries(message)[0] ?? ['', {}];
        child.send({ [kind]: { id, ...(body as object) } });
      }),
  };
  agents.push(agent);
  return agent;
}

const stopAgent = (agent: Agent): Promise<void> => stopForkedChild(agent.child);

async function read<M extends BrokerApiMethod>(method: M, input: object = {}): Promise<BrokerApi[M]['output']> {
  const reply = await sendControlRequest(controlSocketPath(dataDir), { op: 'api', method, input });
  if (!reply.ok) throw new Error(reply.error.code);
  return reply.value as BrokerApi[M]['output'];
}

/** The agent's session once recorded (`approved`: once approved — its SESSION_APPROVED is a commit after its start). */
async function sessionOf(pid: number | undefined, approved = false): Promise<SessionSummary> {
  let found: SessionSummary | undefined;
  const seen = (s: SessionSummary | undefined): boolean => s !== undefined && (!approved || s.status === 'approved');
  await expect
    .poll(async () => seen((found = (await read('sessions.list')).sessions.find((s) => s.pid === pid))), {
      timeout: answerWaitMs,
      interval: 50,
    })
    .toBe(true);
  return found as SessionSummary;
}

async function cardFor(sessionId: string, route: string, except?: number): Promise<ApprovalCard> {
  let found: ApprovalCard | undefined;
  const matches = (c: ApprovalCard): boolean =>
    c.session?.session_id === sessionId && c.target.includes(route) && c.ticket !== except;
  await expect
    .poll(async () => (found = (await read('approvals.list')).cards.find(matches)) !== undefined, {
      timeout: answerWaitMs,
      interval: 50,
    })
    .toBe(true);
  return found as ApprovalCard;
}

function httpCall(agent: Agent, route: string, timeoutMs = 20_000): Promise<unknown> {
  return agent.exchange({
    tool: { name: 'http_request', args: { route, method: 'GET', path: '/x', timeout_ms: timeoutMs } },
  });
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), prefix));
  dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'docs-token',
    kind: 'bearer',
    secret: Buffer.from('palw-token'),
    bindings: ['docs', 'admin', '127.0.0.1'],
  });
  await vault.close();
  const passphraseFile = path.join(scratch, 'pass');
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  target = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  const route = (name: string, approval: string): string[] => [
    `  - name: ${name}`,
    `    base_url: ${base}`,
    '    credential: docs-token',
    '    injection: bearer',
    `    approval: ${approval}`,
  ];
  const yaml = [
    'version: 1',
    'agents:',
    '  session_approval: required',
    'routes:',
    ...route('docs', 'session'),
    ...route('admin', 'per_call'),
    '',
  ];
  writeFileSync(path.join(dataDir, 'postern.yaml'), yaml.join('\n'));
  await acceptConfigAsPerson(dataDir, passphraseFile);
  daemon = await startDaemon(dataDir);
  // Unlocked as a person does (not from a file, whose passphrase would prove no person for the decisions below).
  await unlockAsPerson(dataDir, passphrase);
  nodeCopy = path.join(scratch, 'bin', 'agent-node');
  mkdirSync(path.dirname(nodeCopy));
  copyFileSync(process.execPath, nodeCopy);
}, 120_000);

afterAll(async () => {
  for (const agent of agents) agent.child.kill('SIGKILL');
  await daemon?.process.stop('SIGTERM');
  await new Promise<void>((resolve) => (target === undefined ? resolve() : target.close(() => resolve())));
  rmSync(scratch, { recursive: true, force: true });
});

/** `text` matched literally inside a RegExp. */
function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A shared library this node process already maps (libm, libc…): preloading it again changes nothing. */
function harmlessLibrary(): string {
  const maps = readFileSync('/proc/self/maps', 'utf8');
  const library = /\s(\/\S*\/lib(?:m|c|dl|pthread)\.so\.\d+)$/m.exec(maps)?.[1];
  return library ?? '/nonexistent/palw-harmless.so';
}

/** The TracerPid line of a process's status (undefined: gone). */
function tracerOf(pid: number | undefined): string | undefined {
  try {
    return /^TracerPid:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** A debugger's connection to a node process's inspector (the Chrome DevTools protocol over a WebSocket). */
interface Inspector {
  /** The port the inspector listens on. */
  readonly port: number;
  /** Runs `expression` inside the inspected process (with the console's `require`) and answers its value. */
  evaluate(expression: string): Promise<unknown>;
  close(): void;
}

/**
 * The attack, as a hostile same-user agent performs it: `kill -USR1` makes the node process open its inspector (on the
 * port its command line named, here 0: any free one, so parallel runs do not collide on 9229), and a WebSocket client
 * — anyone on the machine — connects to it and runs code inside the process.
 */
async function openInspector(agent: Agent): Promise<Inspector> {
  process.kill(agent.pid ?? 0, 'SIGUSR1');
  let url: string | undefined;
  await expect
    .poll(() => (url = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/.exec(agent.stderr())?.[1]), {
      timeout: answerWaitMs,
      interval: 50,
    })
    .toBeDefined();
  const ws = new WebSocket(url ?? '');
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let next = 0;
  const waiting = new Map<number, (reply: { result?: { result?: { value?: unknown } } }) => void>();
  ws.onmessage = (event: MessageEvent<string>) => {
    const reply = JSON.parse(event.data) as { id?: number; result?: { result?: { value?: unknown } } };
    if (reply.id !== undefined) waiting.get(reply.id)?.(reply);
  };
  return {
    port: Number(new URL(url ?? '').port),
    evaluate: (expression) =>
      new Promise((resolve) => {
        const id = (next += 1);
        waiting.set(id, (reply) => resolve(reply.result?.result?.value));
        const params = { expression, includeCommandLineAPI: true, returnByValue: true };
        ws.send(JSON.stringify({ id, method: 'Runtime.evaluate', params }));
      }),
    close: () => ws.close(),
  };
}

/** Whether something accepts connections on 127.0.0.1:`port` (the inspector answers its /json/list). */
async function listening(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/json/list`).then(
    (response) => response.ok,
    () => false,
  );
}

/** Why the ptrace cases cannot run here (no strace, or the kernel refuses it ptrace), or undefined. */
const straceMissing = ((): string | undefined => {
  const run = spawnSync('strace', ['-q', '-f', '-o', '/dev/null', 'true'], { stdio: 'ignore' });
  if (run.error !== undefined) return `strace cannot be run (${run.error.message})`;
  return run.status === 0 ? undefined : `strace exited ${run.status}: ptrace is not allowed here`;
})();
if (straceMissing !== undefined)
  console.warn(`tests/process-allowlist.test.ts: the ptrace attacks are skipped: ${straceMissing}`);

describe('when an agent executable is on the allowlist', () => {
  let entryId: string;

  it('a person adds it by path with the hash the broker showed, and a read lists it', async () => {
    const shown = await read('allowlist.preview', { path: nodeCopy });
    const sha256 = `sha256:${createHash('sha256').update(readFileSync(nodeCopy)).digest('hex')}`;
    expect(shown).toEqual({ path: nodeCopy, sha256, signing: null });
    const input = { path: nodeCopy, expected_sha256: shown.sha256 };
    const added = await decideAsPerson(dataDir, passphrase, 'allowlist.add', input);
    expect(added).toMatchObject({ added: true, entry: { path: nodeCopy, sha256, routes: [], hosts: [] } });
    entryId = added.entry.entry_id;
    expect((await read('allowlist.list')).entries.map((e) => e.entry_id)).toEqual([entryId]);
    // The same executable again adds nothing.
    expect(await decideAsPerson(dataDir, passphrase, 'allowlist.add', input)).toMatchObject({ added: false });
    // A hash the broker did not compute for these bytes (the file changed since the look) is refused.
    const other = { path: nodeCopy, expected_sha256: `sha256:${'0'.repeat(64)}` };
    await expect(decideAsPerson(dataDir, passphrase, 'allowlist.add', other)).rejects.toMatchObject({
      code: 'EXECUTABLE_UNVERIFIABLE',
      message: expect.stringContaining('hashes differently now') as unknown,
    });
    expect((await read('allowlist.list')).entries).toHaveLength(1);
  }, 60_000);

  it('its session is approved at open by the entry, session calls go through, a per_call route still shows a card', async () => {
    const agent = await startAgent(nodeCopy, 'allowlisted-agent');
    const session = await sessionOf(agent.child.pid, true);
    expect(session).toMatchObject({ status: 'approved', approved_by: `policy:allowlist:${entryId}`, exe: nodeCopy });
    const through = (await httpCall(agent, 'docs')) as {
      isError?: boolean;
      structuredContent?: { response?: { status?: number } };
    };
    expect(through.isError).toBe(false);
    expect(through.structuredContent?.response?.status).toBe(200);

    const perCall = httpCall(agent, 'admin', 1_000);
    const card = await cardFor(session.session_id, 'admin');
    expect(card.state).toBe('pending');
    expect(await perCall).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
    await decideAsPerson(dataDir, passphrase, 'approvals.reject', { ticket: card.ticket, reason: 'test' });
    await stopAgent(agent);
  }, 90_000);

  describe('when the allowlisted executable is started to run code it was not built with, or under a tracer', () => {
    /** Each attack: the session waits for a person, says why the entry did not apply, and a session call waits. */
    async function expectCard(agent: Agent, why: string): Promise<void> {
      try {
        const session = await sessionOf(agent.pid);
        expect(session).toMatchObject({ status: 'pending', exe: nodeCopy, allowlist_withheld: why });
        const started = (await read('activity.list', { session_id: session.session_id })).events.find(
          (e) => e.kind === 'SESSION_STARTED',
        );
        expect(started?.summary).toContain(`allowlist not applied: ${why}`);
        // The operator's table says it too, in the Sessions card's words (the real CLI against this daemon).
        const table = await runPostern(['sessions', '--data-dir', dataDir]);
        expect(table.code).toBe(0);
        const row = table.stdout.split('\n').find((line) => line.startsWith(`${session.session_id}  `));
        expect(row).toMatch(new RegExp(`^${session.session_id}  pending .* allowlist not applied: ${escaped(why)}$`));
        const waiting = httpCall(agent, 'docs', 1_000);
        expect((await cardFor(session.session_id, 'docs')).state).toBe('awaiting_session');
        expect(await waiting).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
        expect((await read('sessions.list')).sessions.find((s) => s.pid === agent.pid)?.status).toBe('pending');
      } finally {
        // The copy must run nowhere for the test that rewrites it.
        await stopAgent(agent);
      }
    }

    it('LD_PRELOAD (a harmless library this node already maps): the session gets its card', async () => {
      const agent = await startAgent(nodeCopy, 'preloaded-agent', { env: { LD_PRELOAD: harmlessLibrary() } });
      await expectCard(agent, 'LD_PRELOAD set');
    }, 90_000);

    it('NODE_OPTIONS=--require=<file>: the session gets its card, naming the option and not the file', async () => {
      const required = path.join(scratch, 'required.cjs');
      writeFileSync(required, '// loaded by NODE_OPTIONS: an attacker would patch the agent from here\n');
      const agent = await startAgent(nodeCopy, 'required-agent', { env: { NODE_OPTIONS: `--require=${required}` } });
      await expectCard(agent, 'NODE_OPTIONS sets --require');
    }, 90_000);

    it.skipIf(straceMissing !== undefined)(
      'under strace (ptrace): the session gets its card',
      async () => {
        const agent = await startAgent(nodeCopy, 'traced-agent', { under: ['strace', '-q', '-f', '-o', '/dev/null'] });
        expect(agent.pid).not.toBe(agent.child.pid);
        await expectCard(agent, 'the process is being traced (ptrace)');
      },
      90_000,
    );

    it.skipIf(straceMissing !== undefined)(
      'withheld once, it stays withheld: a second connection after the tracer detached is not approved by the entry',
      async () => {
        // -I 1: a strace that started its command blocks SIGINT unless told not to; then SIGINT makes it detach.
        const under = ['strace', '-I', '1', '-q', '-f', '-o', '/dev/null'];
        const agent = await startAgent(nodeCopy, 'detached-agent', { under });
        try {
          const session = await sessionOf(agent.pid);
          expect(session).toMatchObject({
            status: 'pending',
            allowlist_withheld: 'the process is being traced (ptrace)',
          });
          // The tracer leaves (whatever it injected stays); the process now reads clean, and connects again.
          agent.child.kill('SIGINT');
          await expect.poll(() => tracerOf(agent.pid), { timeout: answerWaitMs, interval: 50 }).toBe('0');
          // A session-mode call on the new connection: it waits for a person, as before the tracer left.
          const call = agent.exchange({
            reconnect: { name: 'http_request', args: { route: 'docs', method: 'GET', path: '/x', timeout_ms: 1_000 } },
          });
          const card = await cardFor(session.session_id, 'docs');
          expect(card.state).toBe('awaiting_session');
          expect(await call).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
          expect((await read('activity.list', { session_id: session.session_id })).events.map((e) => e.kind)).toContain(
            'SESSION_RECONNECTED',
          );
          expect((await read('sessions.list')).sessions.find((s) => s.pid === agent.pid)).toMatchObject({
            status: 'pending',
            approved_by: null,
          });
        } finally {
          if (agent.pid !== undefined) killQuietly(agent.pid);
          await stopAgent(agent);
        }
      },
      90_000,
    );

    it.skipIf(straceMissing !== undefined)(
      'a tracer attached after the allowlist approved the session: its next session call gets a card',
      async () => {
        const agent = await startAgent(nodeCopy, 'attached-agent');
        const session = await sessionOf(agent.pid, true);
        expect(session).toMatchObject({ approved_by: `policy:allowlist:${entryId}`, allowlist_withheld: null });
        const strace = spawn('strace', ['-q', '-f', '-o', '/dev/null', '-p', String(agent.pid)], { stdio: 'ignore' });
        try {
          await expect.poll(() => tracerOf(agent.pid), { timeout: answerWaitMs, interval: 50 }).not.toBe('0');
          const call = httpCall(agent, 'docs', 1_000);
          const card = await cardFor(session.session_id, 'docs');
          expect(card.state).toBe('pending');
          expect(await call).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
          await decideAsPerson(dataDir, passphrase, 'approvals.reject', { ticket: card.ticket, reason: 'traced' });
        } finally {
          strace.kill('SIGINT');
          await stopAgent(agent);
        }
      },
      90_000,
    );
    it('node’s inspector opened by SIGUSR1 before it connects (code run through it): the session gets its card', async () => {
      const agent = await startAgent(nodeCopy, 'inspected-early-agent', {
        execArgv: ['--inspect-port=0'],
        stderr: true,
        connectOnRequest: true,
      });
      const inspector = await openInspector(agent);
      try {
        expect(await inspector.evaluate('process.pid')).toBe(agent.pid);
        await agent.connect();
      } finally {
        inspector.close();
      }
      await expectCard(agent, tcpListenerWithheld);
    }, 90_000);

    it('node’s inspector opened by SIGUSR1 after the allowlist approved the session: its next session calls get cards, also after the inspector closed again', async () => {
      const agent = await startAgent(nodeCopy, 'inspected-agent', { execArgv: ['--inspect-port=0'], stderr: true });
      let inspector: Inspector | undefined;
      try {
        const session = await sessionOf(agent.pid, true);
        expect(session).toMatchObject({ approved_by: `policy:allowlist:${entryId}`, allowlist_withheld: null });
        // Before the signal the entry approves its calls (so what follows is the inspector's doing).
        expect(await httpCall(agent, 'docs')).toMatchObject({ structuredContent: { response: { status: 200 } } });

        inspector = await openInspector(agent);
        expect(await listening(inspector.port)).toBe(true);
        // Code of the attacker's choosing runs inside the allowlisted process: here it names the process it runs in.
        expect(await inspector.evaluate('process.pid')).toBe(agent.pid);
        const call = httpCall(agent, 'docs', 1_000);
        const card = await cardFor(session.session_id, 'docs');
        expect(card.state).toBe('pending');
        expect(await call).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
        await decideAsPerson(dataDir, passphrase, 'approvals.reject', { ticket: card.ticket, reason: 'inspected' });

        // The attacker closes the inspector from inside (what it evaluated stays): the process reads clean again.
        const closing = "((inspector) => (setTimeout(() => inspector.close(), 100), 'closing'))(require('inspector'))";
        expect(await inspector.evaluate(closing)).toBe('closing');
        inspector.close();
        await expect.poll(() => listening(inspector?.port ?? 0), { timeout: answerWaitMs, interval: 50 }).toBe(false);
        const again = httpCall(agent, 'docs', 1_000);
        const second = await cardFor(session.session_id, 'docs', card.ticket);
        expect(second.state).toBe('pending');
        expect(await again).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
        await decideAsPerson(dataDir, passphrase, 'approvals.reject', { ticket: second.ticket, reason: 'inspected' });
      } finally {
        inspector?.close();
        await stopAgent(agent);
      }
    }, 90_000);
  });

  it('the original node (another path) is not matched: its session waits for a person', async () => {
    const agent = await startAgent(process.execPath, 'unlisted-agent');
    const session = await sessionOf(agent.child.pid);
    expect(session.status).toBe('pending');
    const waiting = httpCall(agent, 'docs', 1_000);
    expect((await cardFor(session.session_id, 'docs')).state).toBe('awaiting_session');
    expect(await waiting).toMatchObject({ structuredContent: { caller_disposition: 'timed_out' } });
    await stopAgent(agent);
  }, 90_000);

  it('the same path with changed bytes is not matched', async () => {
    // The copy runs nowhere now (a running executable cannot be written): the allowlisted agent stopped above.
    appendFileSync(nodeCopy, Buffer.from('\0changed after the entry was added\0'));
    const agent = await startAgent(nodeCopy, 'modified-agent');
    const session = await sessionOf(agent.child.pid);
    expect(session).toMatchObject({ status: 'pending', exe: nodeCopy });
    await stopAgent(agent);
  }, 90_000);
});

describe('when an agent tries to change the allowlist', () => {
  it('the agent socket answers OPERATOR_ONLY and the control socket refuses its process tree, passphrase or not', async () => {
    const agent = await startAgent(process.execPath, 'meddling-agent');
    await sessionOf(agent.child.pid);
    for (const name of ['allowlist.add', 'allowlist.remove', 'allowlist.list']) {
      expect(await agent.exchange({ tool: { name, args: { path: process.execPath } } })).toMatchObject({
        isError: true,
        structuredContent: { error: { code: 'OPERATOR_ONLY' } },
      });
    }
    const before = (await read('allowlist.list')).entries.length;
    const viaControl = await agent.exchange({
      control: {
        method: 'allowlist.add',
        input: { path: process.execPath, expected_sha256: `sha256:${'0'.repeat(64)}` },
        proof: { passphrase },
      },
    });
    expect(viaControl).toMatchObject({ ok: false, error: { code: 'OPERATOR_ONLY' } });
    expect((await read('allowlist.list')).entries).toHaveLength(before);
    await stopAgent(agent);
  }, 90_000);

  it('a person removes an entry; an unknown id is NOT_FOUND naming the field', async () => {
    const [entry] = (await read('allowlist.list')).entries;
    expect(entry).toBeDefined();
    await decideAsPerson(dataDir, passphrase, 'allowlist.remove', { entry_id: entry?.entry_id ?? '' });
    expect((await read('allowlist.list')).entries).toHaveLength(0);
    await expect(
      decideAsPerson(dataDir, passphrase, 'allowlist.remove', { entry_id: entry?.entry_id ?? '' }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
  }, 60_000);
});

/**
 * The exec attack, performed: a process the allowlist approved (here Debian's python3, allowlisted by path and hash)
 * execs another program (node) in place — same pid, same start time, same connection — and that program asks for a
 * session-mode call. The session's approval was for the allowlisted program: the call must get a card, never run on
 * that approval. (python3 is the stand-in because node 20 cannot exec in place; it is on every machine that builds the
 * native addon.)
 */
const pythonExe = ['/usr/bin/python3', '/usr/bin/python3.11'].map(realPathOrUndefined).find((p) => p !== undefined);
if (pythonExe === undefined)
  console.warn('tests/process-allowlist.test.ts: the exec attack is skipped: no /usr/bin/python3');

function realPathOrUndefined(file: string): string | undefined {
  try {
    return realpathSync(file);
  } catch {
    return undefined;
  }
}

const execAgentPython = String.raw`
import json, os, socket, sys
sock_path, node, script = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock_path)
def send(m):
    s.sendall((json.dumps(m) + "\n").encode())
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26",
      "capabilities": {}, "clientInfo": {"name": "exec-agent", "version": "1"}}})
buf = b""
while b"\n" not in buf:
    buf += s.recv(65536)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
print("ready", flush=True)
sys.stdin.readline()
os.set_inheritable(s.fileno(), True)
os.execv(node, [node, script, str(s.fileno())])
`;

const execAgentNode = `
import net from 'node:net';
const socket = new net.Socket({ fd: Number(process.argv[2]), readable: true, writable: true });
socket.setEncoding('utf8');
let buffered = '';
socket.on('data', (text) => {
  buffered += text;
  for (let nl = buffered.indexOf('\\n'); nl >= 0; nl = buffered.indexOf('\\n')) {
    const message = JSON.parse(buffered.slice(0, nl));
    buffered = buffered.slice(nl + 1);
    if (message.id === 2) {
      process.stdout.write(JSON.stringify(message.result ?? message.error) + '\\n');
      process.exit(0);
    }
  }
});
socket.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'http_request',
  arguments: { route: 'docs', method: 'GET', path: '/after-exec', timeout_ms: 1500 } } }) + '\\n');
`;

describe.skipIf(pythonExe === undefined)('when an allowlisted process execs another program on its connection', () => {
  it('the exec’d program’s session-mode call gets a card: the approval was for the program that was approved', async () => {
    const python = pythonExe ?? '';
    const shown = await read('allowlist.preview', { path: python });
    const added = await decideAsPerson(dataDir, passphrase, 'allowlist.add', {
      path: python,
      expected_sha256: shown.sha256,
    });
    const scripts = path.join(scratch, 'exec-agent');
    mkdirSync(scripts, { recursive: true });
    writeFileSync(path.join(scripts, 'agent.py'), execAgentPython);
    writeFileSync(path.join(scripts, 'after-exec.mjs'), execAgentNode);
    const child = spawn(
      python,
      [
        path.join(scripts, 'agent.py'),
        agentSocketPath(dataDir),
        process.execPath,
        path.join(scripts, 'after-exec.mjs'),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const nextLine = async (): Promise<string> => {
      const timeout = new Promise<never>((_resolve, reject) =>
        setTimeout(() => reject(new Error('no line from the exec agent')), answerWaitMs).unref(),
      );
      const next = await Promise.race([lines.next(), timeout]);
      if (next.done === true) throw new Error('the exec agent closed its output');
      return next.value;
    };
    try {
      expect(await nextLine()).toBe('ready');
      const session = await sessionOf(child.pid, true);
      expect(session).toMatchObject({ approved_by: `policy:allowlist:${added.entry.entry_id}`, exe: python });
      child.stdin.write('go\n');
      const card = await cardFor(session.session_id, 'docs');
      expect(card.state).toBe('pending');
      const answer = JSON.parse(await nextLine()) as {
        structuredContent?: { caller_disposition?: string; response?: unknown };
      };
      expect(answer.structuredContent).toMatchObject({ caller_disposition: 'timed_out' });
      expect(answer.structuredContent?.response).toBeUndefined();
      await decideAsPerson(dataDir, passphrase, 'approvals.reject', { ticket: card.ticket, reason: 'exec test' });
    } finally {
      child.kill('SIGKILL');
      await decideAsPerson(dataDir, passphrase, 'allowlist.remove', { entry_id: added.entry.entry_id });
    }
  }, 90_000);
});

/** SIGKILL a pid that may be gone already (a tracee left behind by its tracer's exit). */
function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}
