import { fork, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard, BrokerApi, BrokerApiMethod, SessionSummary } from '../broker/contract/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from '../tests/support/accepted-config.js';
import type { ToolReply } from '../tests/support/drill-agent.js';
import { posternBin, repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import {
  assertRendererBuilt,
  launchChromium,
  openOperatorPage,
  operatorAuthorization,
  type OperatorPage,
} from './fixtures/browser.js';
import { stopForkedChild } from '../tests/support/forked-agent.js';

/**
 * The process allowlist by clicks (issue #20): a real daemon with session approval `required`, a session route `docs`
 * and a per_call route `admin`; agents are real MCP SDK clients through `postern mcp` (tests/support/race-agent.mjs)
 * running under a COPY of the node executable, so the broker hashes /proc/<pid>/exe of a file this test owns. The
 * first agent's session waits in the Sessions view; a person clicks "Always allow this executable": the session is
 * approved, the allowlist holds the copy's path and sha256, and the agent's waiting session-route call is dispatched.
 * A second agent from the same copy is approved at connect by the entry (no card), and its per_call call still gets a
 * card. Waits are on the page (auto-waiting locators), the agent's answer or the broker's state, never sleeps.
 */
const prefix = 'pe2e-alw-';
const passphrase = `${prefix} passphrase (test only)`;
const routeCanary = 'CANARY-e2e-allowlist-token-7c19';
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const waitMs = 30_000;

let scratch: string;
let dataDir: string;
let daemon: RunningDaemon;
let target: Server;
let nodeCopy: string;
let browser: Browser;
let operator: OperatorPage;
/** Paths the target received, in order: a dispatched call is one arrival. */
const arrivals: string[] = [];
const agents: Agent[] = [];

interface Agent {
  readonly child: ChildProcess;
  readonly pid: number;
  call(tool: string, args: Record<string, unknown>): Promise<ToolReply>;
}

/** Forks race-agent.mjs under `execPath` (its `postern mcp` shim runs under it too); resolves once connected. */
async function startAgent(execPath: string, name: string, env: Record<string, string> = {}): Promise<Agent> {
  const child = fork(path.join(repoRoot, 'tests', 'support', 'race-agent.mjs'), [posternBin, dataDir, name], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    execPath,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let next = 0;
  const waiting = new Map<number, { resolve: (reply: ToolReply) => void; reject: (error: Error) => void }>();
  child.on('message', (message: { result?: { id: number; reply?: ToolReply; error?: string } }) => {
    const result = message.result;
    if (result === undefined) return;
    const entry = waiting.get(result.id);
    waiting.delete(result.id);
    if (result.error !== undefined) entry?.reject(new Error(result.error));
    else entry?.resolve(result.reply ?? {});
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} not ready within ${waitMs} ms`)), waitMs);
    child.once('message', (m: { ready?: boolean; fatal?: string }) => {
      clearTimeout(timer);
      if (m.ready === true) resolve();
      else reject(new Error(`${name}: ${m.fatal ?? 'failed'}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready`));
    });
  });
  if (child.pid === undefined) throw new Error(`${name} has no pid`);
  const agent: Agent = {
    child,
    pid: child.pid,
    call: (tool, args) => {
      const id = (next += 1);
      const reply = new Promise<ToolReply>((resolve, reject) => waiting.set(id, { resolve, reject }));
      child.send({ call: { id, tool, args } });
      return reply;
    },
  };
  agents.push(agent);
  return agent;
}

const stopAgent = (agent: Agent): Promise<void> => stopForkedChild(agent.child);

/** One operator call as the page makes it (POST /api/<method>, the signed-in session as bearer). */
async function api<M extends BrokerApiMethod>(method: M): Promise<BrokerApi[M]['output']> {
  const answer = await fetch(`${daemon.origin}/api/${method}`, {
    method: 'POST',
    headers: { ...(await operatorAuthorization(daemon.operatorUrl)), 'Content-Type': 'application/json' },
    body: '{}',
  });
  const reply = (await answer.json()) as { ok: boolean; value: BrokerApi[M]['output'] };
  if (!reply.ok) throw new Error(`${method} failed: ${JSON.stringify(reply)}`);
  return reply.value;
}

/** Polls `read` until `done` holds, within the deadline; returns the value that held. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  let last: T | undefined;
  await expect
    .poll(async () => done((last = await read())), { timeout: waitMs, interval: 50, message: what })
    .toBe(true);
  return last as T;
}

const sessionOf = (agent: Agent): Promise<SessionSummary> =>
  until(
    async () => (await api('sessions.list')).sessions.find((s) => s.pid === agent.pid),
    (s) => s !== undefined,
    `the session of pid ${agent.pid}`,
  ) as Promise<SessionSummary>;

const cardFor = (sessionId: string, route: string): Promise<ApprovalCard> =>
  until(
    async () =>
      (await api('approvals.list')).cards.find((c) => c.session?.session_id === sessionId && c.target.includes(route)),
    (c) => c !== undefined,
    `a card of ${sessionId} on ${route}`,
  ) as Promise<ApprovalCard>;

const httpCall = (agent: Agent, route: string, marker: string): Promise<ToolReply> =>
  agent.call('http_request', { route, method: 'GET', path: `/${marker}`, timeout_ms: 60_000 });

const sessionCard = (page: Page, id: string): Locator => page.getByTestId(`session-${id}`);
/** Waits until the locator's text contains `text` (auto-waiting: resolves when the page shows it). */
const showing = (locator: Locator, text: string): Promise<void> => locator.filter({ hasText: text }).waitFor();

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

async function writeConfig(base: string): Promise<void> {
  const route = (name: string, approval: string): string[] => [
    `  - name: ${name}`,
    `    base_url: ${base}`,
    '    credential: docs-token',
    '    injection: bearer',
    `    approval: ${approval}`,
  ];
  const yaml = ['version: 1', 'agents:', '  session_approval: required', 'routes:'];
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [...yaml, ...route('docs', 'session'), ...route('admin', 'per_call'), ''].join('\n'),
  );
  const passphraseFile = path.join(scratch, 'pass');
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  await acceptConfigAsPerson(dataDir, passphraseFile);
  // Unlocked at start: with a locked vault the allowlist is sealed and adds are refused VAULT_LOCKED.
  daemon = await startDaemon(dataDir, { person: { passphraseFile } });
}

beforeAll(async () => {
  if (process.platform !== 'linux') throw new Error('the process allowlist matches by /proc/<pid>/exe: Linux only');
  assertRendererBuilt(repoRoot);
  mkdirSync(screenshots, { recursive: true });
  scratch = mkdtempSync(path.join(os.tmpdir(), prefix));
  dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'docs-token',
    kind: 'bearer',
    secret: Buffer.from(routeCanary),
    bindings: ['docs', 'admin', '127.0.0.1'],
  });
  await vault.close();
  target = createServer((req, res) => {
    arrivals.push(req.url ?? '');
    res.end('ok');
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  await writeConfig(`http://127.0.0.1:${(target.address() as AddressInfo).port}`);
  nodeCopy = path.join(scratch, 'bin', 'agent-node');
  mkdirSync(path.dirname(nodeCopy));
  copyFileSync(process.execPath, nodeCopy);
  browser = await launchChromium();
  operator = await openOperatorPage(browser, daemon.operatorUrl);
  await operator.page.getByRole('tab', { name: /^Sessions/ }).click();
  await operator.page.getByTestId('sessions-view').waitFor();
}, 120_000);

afterAll(async () => {
  for (const agent of agents) agent.child.kill('SIGKILL');
  await operator?.context.close();
  await browser?.close();
  await daemon?.process.stop('SIGTERM');
  await new Promise<void>((resolve) => (target === undefined ? resolve() : target.close(() => resolve())));
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

describe('the Sessions card: "Always allow this executable"', () => {
  let entryId: string;

  it('approves the waiting session, adds the copy by path + sha256, and its held session-route call is sent', async () => {
    const { page } = operator;
    const agent = await startAgent(nodeCopy, 'allowlist-first');
    const session = await sessionOf(agent);
    expect(session).toMatchObject({ status: 'pending', exe: nodeCopy });
    const id = session.session_id;
    const card = sessionCard(page, id);
    await showing(page.getByTestId(`session-${id}-status`), 'pending');

    // Its session-route call waits for the session: no arrival until the person decides.
    const held = httpCall(agent, 'docs', 'first-held');
    expect((await cardFor(id, 'docs')).state).toBe('awaiting_session');
    expect(arrivals).not.toContain('/first-held');
    // The card shows the sha256 the broker computed for the executable; the click binds the add to exactly it.
    const sha256 = `sha256:${createHash('sha256').update(readFileSync(nodeCopy)).digest('hex')}`;
    const shown = page.getByTestId(`session-${id}-exe-sha256`);
    await expect.poll(() => shown.getAttribute('data-sha256'), { timeout: waitMs }).toBe(sha256);
    await showing(shown, sha256.slice(0, 'sha256:'.length + 12));
    await shoot(page, 'allowlist-session-pending.png');

    await page.getByTestId(`session-${id}-always-allow`).click();
    await showing(page.getByTestId(`session-${id}-status`), 'approved');
    await expect.poll(() => page.getByTestId(`session-${id}-always-allow`).count(), { timeout: waitMs }).toBe(0);

    const { entries } = await api('allowlist.list');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ path: nodeCopy, sha256, routes: [], hosts: [] });
    entryId = entries[0]?.entry_id ?? '';
    // The click approved the session as the person who clicked, not as the entry's policy.
    const approved = (await api('sessions.list')).sessions.find((s) => s.session_id === id);
    expect(approved).toMatchObject({ status: 'approved' });
    expect(approved?.approved_by).toMatch(/^person:/);
    await showing(card, `approved by ${approved?.approved_by ?? ''}`);
    await showing(card, 'executable allowed; session approved');

    const reply = await held;
    expect(reply.isError).toBe(false);
    expect(reply.structuredContent).toMatchObject({ response: { status: 200 } });
    expect(arrivals.filter((a) => a === '/first-held')).toHaveLength(1);
    await shoot(page, 'allowlist-session-allowed.png');
    await stopAgent(agent);
  }, 90_000);

  it('a second agent from the same copy is approved at connect by the entry; its per_call call still gets a card', async () => {
    const { page } = operator;
    const agent = await startAgent(nodeCopy, 'allowlist-second');
    const session = await sessionOf(agent);
    const id = session.session_id;
    // Approved as the session opened (SESSION_APPROVED by the entry), with no card and no click.
    expect(session).toMatchObject({ status: 'approved', approved_by: `policy:allowlist:${entryId}`, exe: nodeCopy });
    await showing(page.getByTestId(`session-${id}-status`), 'approved');
    await showing(sessionCard(page, id), `approved by policy:allowlist:${entryId}`);
    expect(await sessionCard(page, id).getByRole('button', { name: 'Approve', exact: true }).count()).toBe(0);
    expect(await page.getByTestId(`session-${id}-always-allow`).count()).toBe(0);

    const through = await httpCall(agent, 'docs', 'second-session');
    expect(through.isError).toBe(false);
    expect(arrivals).toContain('/second-session');
    expect((await api('approvals.list')).cards.filter((c) => c.session?.session_id === id)).toEqual([]);
    await shoot(page, 'allowlist-session-by-entry.png');

    // The entry skips the session card only: a per_call call waits for a person, who rejects it by click.
    const perCall = httpCall(agent, 'admin', 'second-per-call');
    const ticket = (await cardFor(id, 'admin')).ticket;
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const approvalCard = page.getByRole('article', { name: `Ticket #${ticket}`, exact: true });
    await approvalCard.waitFor();
    await shoot(page, 'allowlist-per-call-card.png');
    await approvalCard.getByRole('button', { name: 'Reject…' }).click();
    await approvalCard.getByRole('textbox').fill('per-call cards stay');
    await approvalCard.getByRole('button', { name: `Reject #${ticket}` }).click();
    expect(await perCall).toMatchObject({ isError: true });
    expect(arrivals).not.toContain('/second-per-call');
    await stopAgent(agent);

    expect(await page.content()).not.toContain(routeCanary);
    expect(operator.problems).toEqual([]);
  }, 90_000);

  it('the same copy started with LD_PRELOAD waits on its card, which says why the entry did not apply', async () => {
    const { page } = operator;
    const preload = path.join(scratch, 'palw-e2e-preload-value.so');
    const agent = await startAgent(nodeCopy, 'allowlist-preloaded', { LD_PRELOAD: preload });
    const session = await sessionOf(agent);
    const id = session.session_id;
    expect(session).toMatchObject({ status: 'pending', exe: nodeCopy, allowlist_withheld: 'LD_PRELOAD set' });
    await page.getByRole('tab', { name: /^Sessions/ }).click();
    await showing(page.getByTestId(`session-${id}-status`), 'pending');
    await showing(page.getByTestId(`session-${id}-allowlist-withheld`), 'allowlist not applied: LD_PRELOAD set');
    // The variable's name, never its value.
    expect(await page.content()).not.toContain('palw-e2e-preload-value');
    await shoot(page, 'allowlist-session-preloaded.png');
    await stopAgent(agent);
    expect(operator.problems).toEqual([]);
  }, 90_000);
});
