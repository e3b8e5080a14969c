import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import type { ApprovalCard, Reply } from '../broker/contract/index.js';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { openVault, type KdfStrength } from '../broker/vault/index.js';
import { DrillAgent } from './support/drill-agent.js';
import { runOnTerminal } from './support/operator-terminal.js';
import {
  posternBin,
  printedSignInCode,
  runPostern,
  signInAsProgram,
  startDaemon,
  type RunningDaemon,
} from './support/postern-process.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';
import { unlockAsPerson } from './support/person-decision.js';

/**
 * "Only a person decides" (issue 14), performed as the attacker would against a real daemon: a
 * same-user process with no terminal — detached by setsid, or by a double fork so that it is no
 * longer anyone's descendant — runs `postern approvals approve N` and `postern vault lock`; a flood
 * of wrong unlocks runs beside `approvals list`. Then the person: the same approval on a
 * pseudo-terminal with the vault passphrase typed, and with a wrong one. And the CI opt-out: the
 * same detached approval is accepted and journaled as the process, never a person. And a daemon
 * started with a passphrase file: a setsid process reads that file and presents the passphrase as
 * proof on control.sock; refused, nothing recorded, the card pending; the operator UI decides.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'poproof-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const passphrase = 'operator proof passphrase (test only)';
/** Every `approvals list` during the unlock flood answers within this (it is ~5 ms when nothing blocks the loop). */
const listP99BoundMs = 200;
const settleWaitMs = 30_000;

interface Rig {
  dataDir: string;
  daemon: RunningDaemon;
  log: ArrivalLogServer;
  agent: DrillAgent;
  stop(): Promise<void>;
}

/**
 * A daemon on its own data directory, unlocked either as a person does it (started locked, then `postern vault unlock`'s
 * request on control.sock), from a passphrase file at start (the headless path: the agent can read the file too), or
 * started locked and unlocked by `postern vault unlock --passphrase-file` (the same file, read by the CLI).
 */
async function openRig(
  name: string,
  options: { unattended: boolean; kdf: KdfStrength; unlock: 'control_socket' | 'passphrase_file' | 'cli_file' },
): Promise<Rig> {
  const dataDir = path.join(scratch, name);
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: options.kdf, idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'proof-token',
    kind: 'bearer',
    secret: Buffer.from('CANARY-proof-token'),
    bindings: ['docs', '127.0.0.1'],
  });
  await vault.close();
  const passphraseFile = path.join(scratch, `${name}.pass`);
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const log = await ArrivalLogServer.start();
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      ...(options.unattended ? ['operator:', '  unattended_decisions: true'] : []),
      'agents:',
      '  session_approval: observe',
      'routes:',
      '  - name: docs',
      `    base_url: http://127.0.0.1:${log.port}`,
      '    credential: proof-token',
      '    injection: bearer',
      '    approval: per_call',
      '    methods: [POST]',
      '',
    ].join('\n'),
  );
  await acceptConfigAsPerson(dataDir, passphraseFile);
  const fromFile = options.unlock === 'passphrase_file';
  const daemon = await startDaemon(dataDir, {
    env: { POSTERN_PASSPHRASE_FILE: fromFile ? passphraseFile : undefined },
  });
  if (options.unlock === 'control_socket') await unlockAsPerson(dataDir, passphrase);
  if (options.unlock === 'cli_file') {
    // Started locked, then unlocked by `postern vault unlock` reading the passphrase from the file.
    const run = await runPostern(['vault', 'unlock', '--data-dir', dataDir, '--passphrase-file', passphraseFile]);
    if (run.code !== 0) throw new Error(`vault unlock --passphrase-file failed: ${run.stdout}${run.stderr}`);
  }
  const agent = await DrillAgent.start(dataDir, `${name}-agent`);
  return {
    dataDir,
    daemon,
    log,
    agent,
    stop: async () => {
      await agent.stop();
      await daemon.process.stop('SIGTERM');
      await log.stop();
    },
  };
}

/** The agent asks for a write that needs a per-call approval; resolves with its pending card. */
async function pendingCard(rig: Rig, marker: string): Promise<ApprovalCard> {
  void rig.agent
    .call('http_request', {
      route: 'docs',
      method: 'POST',
      path: `/docs/${marker}`,
      body: JSON.stringify({ marker }),
      timeout_ms: 120_000,
    })
    .reply.catch(() => undefined);
  const deadline = Date.now() + settleWaitMs;
  for (;;) {
    const card = (await callOperator(rig.dataDir, 'approvals.list', {})).cards.find(
      (c) => c.body_preview?.includes(marker) === true,
    );
    if (card !== undefined && card.state === 'pending') return card;
    if (Date.now() > deadline) throw new Error(`no pending card for ${marker}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Runs `script` in `sh` started in a new session (no controlling terminal, as a backgrounded agent
 * tool is) and waits for the marker line that the detached `postern` writes when it is done.
 */
async function detached(
  shellScript: (postern: string, out: string) => string,
  name: string,
): Promise<{ code: number; output: string }> {
  const out = path.join(scratch, `${name}.out`);
  const postern = `'${process.execPath}' '${posternBin}'`;
  const shell = spawn('sh', ['-c', shellScript(postern, out)], { detached: true, stdio: 'ignore' });
  await new Promise<void>((resolve) => shell.once('exit', () => resolve()));
  const deadline = Date.now() + settleWaitMs;
  for (;;) {
    const text = existsSync(out) ? readFileSync(out, 'utf8') : '';
    const exit = /\nexit=(\d+)\n/.exec(`\n${text}`);
    if (exit !== null) return { code: Number(exit[1]), output: text };
    if (Date.now() > deadline) throw new Error(`the detached postern did not finish: ${text}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The APPROVED event's summary for the action, if any ("by <actor> …"). */
async function approvedBy(dataDir: string, actionId: string): Promise<string[]> {
  const shown = await callOperator(dataDir, 'actions.show', { action_id: actionId });
  return shown.events.filter((e) => e.kind === 'APPROVED').map((e) => e.summary);
}

describe('when a same-user process without a terminal tries to decide (no opt-out)', () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await openRig('guarded', { unattended: false, kdf: 'interactive', unlock: 'control_socket' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  it('refuses the double fork and the setsid approval: the card stays pending and no APPROVED is recorded', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'self-approval');
    const dir = `--data-dir '${rig.dataDir}'`;
    const doubleFork = await detached(
      (postern, out) =>
        `(${postern} approvals approve ${card.ticket} ${dir} > '${out}' 2>&1; echo "exit=$?" >> '${out}') & exit`,
      'double-fork',
    );
    const setsid = await detached(
      (postern, out) =>
        `setsid sh -c "${postern} approvals approve ${card.ticket} ${dir} > '${out}' 2>&1; echo exit=\\$? >> '${out}'" </dev/null`,
      'setsid',
    );
    for (const attempt of [doubleFork, setsid]) {
      expect(attempt.code).toBe(1);
      expect(attempt.output).toContain('OPERATOR_PROOF_REQUIRED');
      expect(attempt.output).toContain('no terminal to ask on');
      expect(attempt.output).not.toContain('approved');
    }
    const still = (await callOperator(rig.dataDir, 'approvals.list', {})).cards.find((c) => c.ticket === card.ticket);
    expect(still?.state).toBe('pending');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    // The raw socket without a proof is refused the same way (the CLI is not the defence).
    const raw = await sendControlRequest(controlSocketPath(rig.dataDir), {
      op: 'api',
      method: 'approvals.approve',
      input: { ticket: card.ticket },
    });
    expect(raw).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'proof' } });
  }, 90_000);

  it('refuses `vault lock` from a detached process; the vault stays unlocked', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const lock = await detached(
      (postern, out) =>
        `(${postern} vault lock --data-dir '${rig?.dataDir}' > '${out}' 2>&1; echo "exit=$?" >> '${out}') & exit`,
      'lock',
    );
    expect(lock.code).toBe(1);
    expect(lock.output).toContain('OPERATOR_PROOF_REQUIRED');
    expect((await callOperator(rig.dataDir, 'vault.status', {})).state).toBe('unlocked');
  }, 60_000);

  it('keeps `approvals list` answering while another process floods wrong unlocks, and backs the flood off', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    // 30 parallel wrong unlocks from another process, each answer printed as one JSON line.
    const flooder = spawn(
      process.execPath,
      [
        '-e',
        `const net = require('node:net');
         const one = () => new Promise((resolve) => { const s = net.createConnection(process.argv[1]); let t = '';
           s.on('connect', () => s.write(JSON.stringify({ op: 'unlock', passphrase: 'wrong guess ' + Math.random() }) + '\\n'));
           // Only the first line is this unlock's answer: an answered idle connection evicted at the cap is then
           // told CONTROL_SOCKET_BUSY too (control-socket.ts), and both lines can arrive in one read.
           s.on('data', (c) => { t += c; const end = t.indexOf('\\n'); if (end >= 0) { s.destroy(); resolve(t.slice(0, end)); } });
           s.on('close', () => resolve(t.trim() || JSON.stringify({ ok: false, error: { code: 'SOCKET_CLOSED' } })));
           s.on('error', (e) => resolve(JSON.stringify({ ok: false, error: { code: 'SOCKET_' + e.code } }))); });
         Promise.all(Array.from({ length: 30 }, one)).then((r) => { console.log(JSON.stringify(r)); });`,
        controlSocketPath(rig.dataDir),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let flood = '';
    flooder.stdout.on('data', (c: Buffer) => (flood += c.toString('utf8')));
    const flooded = new Promise<void>((resolve) => flooder.once('exit', () => resolve()));
    let done = false;
    void flooded.then(() => (done = true));
    const latencies: number[] = [];
    while (!done || latencies.length < 30) {
      const started = performance.now();
      await callOperator(rig.dataDir, 'approvals.list', {});
      latencies.push(performance.now() - started);
    }
    await flooded;
    const answers = (JSON.parse(flood) as string[]).map(
      (line) => JSON.parse(line) as { ok: boolean; error: { code: string; retry_after_ms?: number } },
    );
    expect(answers).toHaveLength(30);
    expect(answers.every((a) => !a.ok)).toBe(true);
    const codes = answers.map((a) => a.error.code);
    // At most one check runs per uid at a time and the gate closes after three: the rest are refused at
    // once with how long to wait, or (beyond the connection cap, while idle) their connection is closed unread:
    // CONTROL_SOCKET_BUSY when the flooder had written its line, SOCKET_EPIPE when the close came first. The
    // `approvals list` beside them sends a request the broker closed unread again (control-client.ts): every one of
    // them above was answered, none failed with a socket error.
    const checked = codes.filter((c) => c === 'VAULT_PASSPHRASE_INVALID').length;
    expect(checked, codes.join(' ')).toBeGreaterThanOrEqual(1);
    expect(checked, codes.join(' ')).toBeLessThanOrEqual(3);
    expect(codes.filter((c) => c === 'PASSPHRASE_BACKOFF').length, codes.join(' ')).toBeGreaterThanOrEqual(10);
    expect(
      codes.every(
        (c) =>
          c === 'VAULT_PASSPHRASE_INVALID' ||
          c === 'PASSPHRASE_BACKOFF' ||
          c === 'CONTROL_SOCKET_BUSY' ||
          c.startsWith('SOCKET_'),
      ),
      codes.join(' '),
    ).toBe(true);
    expect(
      answers.filter((a) => a.error.code === 'PASSPHRASE_BACKOFF').every((a) => (a.error.retry_after_ms ?? 0) > 0),
    ).toBe(true);
    const sorted = [...latencies].sort((a, b) => a - b);
    const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? Infinity;
    expect(p99, `approvals list latencies (ms): ${sorted.map((l) => l.toFixed(1)).join(' ')}`).toBeLessThan(
      listP99BoundMs,
    );
    expect((await callOperator(rig.dataDir, 'vault.status', {})).state).toBe('unlocked');
  }, 90_000);

  it("accepts a person's approval on a terminal with the passphrase, recorded as person/cli/passphrase on tty; refuses a wrong one, then backs off", async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    // The flood above closed this uid's gate; a person waits it out like anyone (bounded: 60 s at most).
    await waitForGate(rig.dataDir);
    const card = await pendingCard(rig, 'person-approval');
    const wrong = await runOnTerminal(
      ['approvals', 'approve', String(card.ticket), '--data-dir', rig.dataDir],
      'not the passphrase',
    );
    expect(wrong.prompted).toBe(true);
    expect(wrong.code).toBe(1);
    expect(wrong.screen).toContain('VAULT_PASSPHRASE_INVALID');
    expect(wrong.screen).not.toContain('not the passphrase');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);

    const right = await runOnTerminal(
      ['approvals', 'approve', String(card.ticket), '--data-dir', rig.dataDir],
      passphrase,
    );
    expect(right.screen).toContain(`approvals.approve, ticket ${card.ticket}`);
    expect(right.code, right.screen).toBe(0);
    expect(right.screen).toContain(`Ticket #${card.ticket} approved`);
    expect(right.screen).not.toContain(passphrase);
    const [summary] = await approvedBy(rig.dataDir, card.action_id);
    expect(summary).toBe(`by person:${os.userInfo().username} (cli, passphrase on tty)`);
    const shown = await runOnTerminal(['actions', 'show', card.action_id, '--data-dir', rig.dataDir], '');
    expect(shown.screen).toContain('APPROVED  by person:');
    expect(shown.screen).toContain('(cli, passphrase on tty)');

    // Three wrong proofs in a row close the gate: the fourth is refused at once with retry_after_ms.
    const other = await pendingCard(rig, 'backoff');
    const replies = [];
    for (let i = 0; i < 4; i += 1) {
      replies.push(
        await sendControlRequest(controlSocketPath(rig.dataDir), {
          op: 'api',
          method: 'approvals.approve',
          input: { ticket: other.ticket },
          proof: { passphrase: `guess ${i}` },
        }),
      );
    }
    expect(replies.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([
      'VAULT_PASSPHRASE_INVALID',
      'VAULT_PASSPHRASE_INVALID',
      'VAULT_PASSPHRASE_INVALID',
      'PASSPHRASE_BACKOFF',
    ]);
    expect(replies[2]).toMatchObject({ ok: false, error: { retry_after_ms: 1_000 } });
    expect(await approvedBy(rig.dataDir, other.action_id)).toEqual([]);
  }, 120_000);
});

/** Waits until a correct proof is admitted again (the backoff from earlier attempts has passed). */
async function waitForGate(dataDir: string): Promise<void> {
  const deadline = Date.now() + 70_000;
  for (;;) {
    const reply = await sendControlRequest(controlSocketPath(dataDir), { op: 'unlock', passphrase });
    if (reply.ok) return;
    if (reply.error.code !== 'PASSPHRASE_BACKOFF' || Date.now() > deadline)
      throw new Error(`the gate did not open: ${JSON.stringify(reply)}`);
    await new Promise((resolve) => setTimeout(resolve, reply.error.retry_after_ms ?? 1_000));
  }
}

describe('when postern.yaml opts out for unattended use', () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await openRig('unattended', { unattended: true, kdf: 'min', unlock: 'passphrase_file' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  it('accepts the detached approval and journals the process (its executable and pid), never a person', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'unattended');
    const run = await detached(
      (postern, out) =>
        `(${postern} approvals approve ${card.ticket} --data-dir '${rig?.dataDir}' > '${out}' 2>&1; echo "exit=$?" >> '${out}') & exit`,
      'unattended',
    );
    expect(run.code, run.output).toBe(0);
    const [summary] = await approvedBy(rig.dataDir, card.action_id);
    expect(summary).toMatch(/^by process:\S*node\S* pid \d+ \(cli, unattended\)$/);
    expect(summary).not.toContain('person');
  }, 90_000);
});

describe('when the daemon was started with a passphrase file (headless, no opt-out)', () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await openRig('from-file', { unattended: false, kdf: 'min', unlock: 'passphrase_file' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  /** A setsid process (no terminal) reads the passphrase file and presents it as proof on control.sock. */
  const presentFromFile = async (r: Rig, ticket: number, name: string): Promise<Reply<unknown>> => {
    const script = path.join(scratch, `${name}.cjs`);
    writeFileSync(
      script,
      `const fs = require('node:fs'); const net = require('node:net');
       const [file, socket, ticket] = process.argv.slice(2);
       const passphrase = fs.readFileSync(file, 'utf8').replace(/\\n$/, '');
       const s = net.createConnection(socket); let t = '';
       s.on('connect', () => s.write(JSON.stringify({ op: 'api', method: 'approvals.approve', input: { ticket: Number(ticket) }, proof: { passphrase } }) + '\\n'));
       s.on('data', (c) => { t += c; if (t.includes('\\n')) { process.stdout.write(t); s.destroy(); } });`,
    );
    const args = [script, path.join(scratch, 'from-file.pass'), controlSocketPath(r.dataDir), String(ticket)];
    const node = `'${process.execPath}' ${args.map((a) => `'${a}'`).join(' ')}`;
    const run = await detached(
      (_postern, out) => `setsid sh -c "${node} > '${out}' 2>&1; echo exit=\\$? >> '${out}'" </dev/null`,
      name,
    );
    expect(run.code, run.output).toBe(0);
    return JSON.parse(run.output.split('\n')[0] ?? '') as Reply<unknown>;
  };

  it('refuses the passphrase read from that file as proof (OPERATOR_PROOF_REQUIRED): the card stays pending, no APPROVED, nothing sent; an unlock over the socket does not change it, nor does the operator UI decide', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'from-file');
    const reply = await presentFromFile(rig, card.ticket, 'from-file-attack');
    expect(reply).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'proof' } });
    const message = reply.ok ? '' : reply.error.message;
    expect(message).toContain('read from a file');
    expect(message).not.toContain(passphrase);
    const pending = async (): Promise<string | undefined> =>
      (await callOperator(rig?.dataDir ?? '', 'approvals.list', {})).cards.find((c) => c.ticket === card.ticket)?.state;
    expect(await pending()).toBe('pending');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    expect(rig.log.markers()).not.toContain('from-file');

    // Unlocking the already unlocked broker over the socket (as `postern vault unlock` would) lifts nothing.
    expect(await sendControlRequest(controlSocketPath(rig.dataDir), { op: 'unlock', passphrase })).toMatchObject({
      ok: true,
    });
    expect(await presentFromFile(rig, card.ticket, 'from-file-after-unlock')).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    expect(await pending()).toBe('pending');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);

    // Nor does the operator UI: its sign-in code was printed by a daemon anyone could have started, and the passphrase
    // that would prove the tab is in a file every process of the user reads.
    const session = await signInAsProgram(rig.daemon);
    const viaWeb = async (pathname: string, body: unknown): Promise<unknown> => {
      const answer = await fetch(`${rig?.daemon.origin ?? ''}${pathname}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session}` },
        body: JSON.stringify(body),
      });
      return answer.json();
    };
    const fromFileRefusal = {
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', proof_refusal: 'passphrase_from_file' },
    };
    expect(await viaWeb('/auth/prove', { passphrase })).toMatchObject(fromFileRefusal);
    expect(await viaWeb('/api/approvals.approve', { ticket: card.ticket })).toMatchObject(fromFileRefusal);
    expect(await pending()).toBe('pending');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    expect(rig.log.markers()).not.toContain('from-file');
  }, 90_000);
  it('the CLI on a terminal does not ask the person for a passphrase it would refuse: it prints the refusal and fails (approve, vault lock)', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'from-file-cli');
    const approve = await runOnTerminal(
      ['approvals', 'approve', String(card.ticket), '--data-dir', rig.dataDir],
      passphrase,
    );
    expect(approve.prompted, approve.screen).toBe(false);
    expect(approve.code).not.toBe(0);
    expect(approve.screen).toContain('OPERATOR_PROOF_REQUIRED');
    expect(approve.screen).toContain('read from a file');
    expect(approve.screen).not.toContain(passphrase);
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);

    const lock = await runOnTerminal(['vault', 'lock', '--data-dir', rig.dataDir], passphrase);
    expect(lock.prompted, lock.screen).toBe(false);
    expect(lock.code).not.toBe(0);
    expect(lock.screen).toContain('OPERATOR_PROOF_REQUIRED');
    expect(lock.screen).toContain('read from a file');
    expect((await callOperator(rig.dataDir, 'vault.status', {})).state).toBe('unlocked');
  }, 90_000);
});

describe('when a daemon started locked is unlocked by `postern vault unlock --passphrase-file`', () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await openRig('cli-file', { unattended: false, kdf: 'min', unlock: 'cli_file' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  it('the broker latches: the passphrase proves no person for the rest of its run, a later unlock without a file included', async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    expect((await callOperator(rig.dataDir, 'vault.status', {})).state).toBe('unlocked');
    const card = await pendingCard(rig, 'cli-file');
    const approve = (): Promise<Reply<unknown>> =>
      sendControlRequest(controlSocketPath(rig?.dataDir ?? ''), {
        op: 'api',
        method: 'approvals.approve',
        input: { ticket: card.ticket },
        proof: { passphrase },
      });
    const refusal = { ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', proof_refusal: 'passphrase_from_file' } };
    expect(await approve()).toMatchObject(refusal);
    // An unlock that does not say it came from a file (as from a terminal) lifts nothing: the file is still readable.
    expect(await sendControlRequest(controlSocketPath(rig.dataDir), { op: 'unlock', passphrase })).toMatchObject({
      ok: true,
    });
    expect(await approve()).toMatchObject(refusal);
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    expect(rig.log.markers()).not.toContain('cli-file');
  }, 90_000);
});

describe("when a same-user process rewrites the vault's key row with a passphrase of its own", () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await openRig('swapped-key', { unattended: false, kdf: 'min', unlock: 'control_socket' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  it("that passphrase proves nothing and unlocks nothing: the card stays pending, no APPROVED, the vault stays locked; the person's passphrase still decides", async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'swapped-key');
    // The agent makes a vault of its own, with its own passphrase, and copies its key row over the broker's.
    const agentPassphrase = 'the agent chose this one';
    const agentDir = path.join(scratch, 'agent-vault');
    mkdirSync(agentDir, { mode: 0o700 });
    const agentVault = await openVault({ dataDir: agentDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await agentVault.init(Buffer.from(agentPassphrase));
    await agentVault.close();
    const keyColumns = ['kdf_alg', 'salt', 'opslimit', 'memlimit', 'nonce', 'wrapped_key', 'protected_by'];
    const selectKey = `SELECT ${keyColumns.join(', ')} FROM vault_key WHERE id = 1`;
    const theirs = new Database(path.join(agentDir, 'vault.sqlite'), { readonly: true });
    const agentRow = theirs.prepare(selectKey).get() as Record<string, unknown>;
    theirs.close();
    const ours = new Database(path.join(rig.dataDir, 'vault.sqlite'), { timeout: 5_000 });
    try {
      const originalRow = ours.prepare(selectKey).get() as Record<string, unknown>;
      const writeKey = ours.prepare(
        `UPDATE vault_key SET ${keyColumns.map((c) => `${c} = @${c}`).join(', ')} WHERE id = 1`,
      );
      writeKey.run(agentRow);
      // The attack's premise: the file's key row now opens with the agent's passphrase.
      const reader = await openVault({ dataDir: rig.dataDir, clock: systemClock, readOnly: true });
      try {
        expect(await reader.verifyPassphrase(Buffer.from(agentPassphrase))).toBe(true);
        expect(await reader.verifyPassphrase(Buffer.from(passphrase))).toBe(false);
      } finally {
        await reader.close();
      }

      const socket = controlSocketPath(rig.dataDir);
      const approve = (proof: string) =>
        sendControlRequest(socket, {
          op: 'api',
          method: 'approvals.approve',
          input: { ticket: card.ticket },
          proof: { passphrase: proof },
        });
      expect(await approve(agentPassphrase)).toMatchObject({
        ok: false,
        error: { code: 'VAULT_PASSPHRASE_INVALID', field: 'proof' },
      });
      expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
      const pending = (await callOperator(rig.dataDir, 'approvals.list', {})).cards.find(
        (c) => c.ticket === card.ticket,
      );
      expect(pending?.state).toBe('pending');

      // A person locks; the agent's passphrase does not unlock.
      expect(
        await sendControlRequest(socket, { op: 'api', method: 'vault.lock', input: {}, proof: { passphrase } }),
      ).toMatchObject({ ok: true });
      expect(await sendControlRequest(socket, { op: 'unlock', passphrase: agentPassphrase })).toMatchObject({
        ok: false,
        error: { code: 'VAULT_PASSPHRASE_INVALID' },
      });
      expect((await callOperator(rig.dataDir, 'vault.status', {})).state).toBe('locked');

      // The broker kept the key row it opened with: the person's passphrase unlocks and decides, the row still swapped.
      expect(await sendControlRequest(socket, { op: 'unlock', passphrase })).toMatchObject({ ok: true });
      expect(await approve(passphrase)).toMatchObject({ ok: true });
      expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([
        `by person:${os.userInfo().username} (cli, passphrase on tty)`,
      ]);
      writeKey.run(originalRow);
    } finally {
      ours.close();
    }
  }, 120_000);
});

describe("when the operator opens the printed link and a same-user process reads it from the browser's command line", () => {
  let rig: Rig | undefined;
  beforeAll(async () => {
    // Unlocked by a person: the web UI decides once a tab presents the passphrase.
    rig = await openRig('argv-link', { unattended: false, kdf: 'min', unlock: 'control_socket' });
  }, 90_000);
  afterAll(() => rig?.stop(), 30_000);

  /**
   * The attacker, detached (setsid): polls every process's /proc/<pid>/cmdline for this daemon's sign-in URL, as
   * `xdg-open` and the browser get it, signs in with the token it read (without a code, then guessing codes), and
   * approves the card with whatever session it got. Prints what it found and what each step answered.
   */
  const readLinkAndApprove = async (r: Rig, ticket: number): Promise<Record<string, unknown>> => {
    const script = path.join(scratch, 'argv-attacker.cjs');
    writeFileSync(
      script,
      `const fs = require('node:fs');
       const [origin, ticket] = process.argv.slice(2);
       const needle = origin + '/?token=';
       const found = () => {
         for (const pid of fs.readdirSync('/proc')) {
           if (!/^\\d+$/.test(pid) || Number(pid) === process.pid) continue;
           let argv = '';
           try { argv = fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8'); } catch { continue; }
           const at = argv.indexOf(needle);
           if (at >= 0) return argv.slice(at + needle.length).split(/[\\0#&]/)[0];
         }
         return undefined;
       };
       const post = async (p, body, headers = {}) => {
         const a = await fetch(origin + p, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
         return { status: a.status, body: await a.json() };
       };
       (async () => {
         let token;
         for (const until = Date.now() + 20000; token === undefined && Date.now() < until; ) {
           token = found();
           if (token === undefined) await new Promise((r) => setTimeout(r, 5));
         }
         const tries = [await post('/auth/session', { token })];
         for (const code of ['0000-0000', '1234-5678', '9999-9999']) tries.push(await post('/auth/session', { token, code }));
         const sessions = tries.map((t) => t.body.value && t.body.value.session).filter(Boolean);
         const approvals = [];
         for (const s of [token, ...sessions]) approvals.push(await post('/api/approvals.approve', { ticket: Number(ticket) }, { Authorization: 'Bearer ' + s }));
         process.stdout.write(JSON.stringify({ token, tries, sessions, approvals }) + '\\n');
       })();`,
    );
    const node = `'${process.execPath}' '${script}' '${r.daemon.origin}' '${ticket}'`;
    const run = await detached(
      (_postern, out) => `setsid sh -c "${node} > '${out}' 2>&1; echo exit=\\$? >> '${out}'" </dev/null &`,
      'argv-attacker',
    );
    expect(run.code, run.output).toBe(0);
    return JSON.parse(run.output.split('\n')[0] ?? '') as Record<string, unknown>;
  };

  it("the token it reads signs nothing in: no guessed code opens it, nothing is approved, the operator is warned; the person's code signs in and decides", async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    const card = await pendingCard(rig, 'argv-link');
    const attack = readLinkAndApprove(rig, card.ticket);
    // The person clicks the printed link: the browser is started with the URL on its command line, as xdg-open does.
    const browser = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)', '--', rig.daemon.operatorUrl], {
      stdio: 'ignore',
    });
    let got: Record<string, unknown>;
    try {
      got = await attack;
    } finally {
      browser.kill();
    }
    // The attack ran: it read the very token the daemon printed.
    expect(got['token']).toBe(rig.daemon.token);
    expect(got['sessions']).toEqual([]);
    expect(got['tries']).toEqual([
      { status: 400, body: { ok: false, error: expect.objectContaining({ code: 'INVALID_ARGUMENT' }) } },
      // Three guesses at 10^8 codes (a right one would fail this test, 3 times in 10^8 runs).
      ...['SIGN_IN_CODE_WRONG', 'SIGN_IN_CODE_WRONG', 'SIGN_IN_CODE_SPENT'].map((code) => ({
        status: 401,
        body: { ok: false, error: expect.objectContaining({ code }) },
      })),
    ]);
    expect(got['approvals']).toEqual([{ status: 401, body: expect.objectContaining({ ok: false }) }]);
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    expect(
      (await callOperator(rig.dataDir, 'approvals.list', {})).cards.find((c) => c.ticket === card.ticket)?.state,
    ).toBe('pending');
    // Told on the operator's terminal, the third miss with the URL spent.
    expect(rig.daemon.process.stderr).toContain(
      'a sign-in presented the current URL with a wrong code (the URL is spent)',
    );

    // The person's tab, with the code they read on the terminal: the guessed-out URL says it was used; the next
    // printed URL and code sign in, and the decision is the person's.
    await expect(signInAsProgram(rig.daemon)).rejects.toThrow('SIGN_IN_USED');
    const next = rig.daemon.process.stdoutLines.findLast((l) => l.startsWith('Operator UI (next sign-in): ')) ?? '';
    const session = await signInAsProgram(
      {
        origin: rig.daemon.origin,
        token: new URL(next.slice('Operator UI (next sign-in): '.length)).searchParams.get('token') ?? '',
        signInCode: printedSignInCode(rig.daemon.process.stdoutLines, 'Sign-in code (next sign-in): '),
      },
      passphrase,
    );
    const approved = await fetch(`${rig.daemon.origin}/api/approvals.approve`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session}` },
      body: JSON.stringify({ ticket: card.ticket }),
    });
    expect(approved.status, await approved.clone().text()).toBe(200);
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([
      `by person:${os.userInfo().username} (web, passphrase in the page)`,
    ]);
  }, 60_000);
});

describe("when a same-user process kills the person's daemon and starts its own on the data directory", () => {
  let rig: Rig | undefined;
  let replacement: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;
  beforeAll(async () => {
    rig = await openRig('replaced', { unattended: false, kdf: 'min', unlock: 'control_socket' });
  }, 90_000);
  afterAll(async () => {
    await agent?.stop();
    await replacement?.process.stop('SIGTERM');
    await rig?.stop();
  }, 30_000);

  /** A decision through the replacement daemon's operator API with a session, answered as JSON. */
  const viaWeb = async (
    session: string,
    pathname: string,
    body: unknown,
  ): Promise<{ status: number; reply: unknown }> => {
    const answer = await fetch(`${replacement?.origin ?? ''}${pathname}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session}` },
      body: JSON.stringify(body),
    });
    return { status: answer.status, reply: await answer.json() };
  };

  it("its daemon's sign-in code (which it reads) approves nothing: the card stays pending, nothing is sent, no APPROVED; guessing the passphrase backs off; the person's tab with the passphrase decides", async () => {
    if (rig === undefined) throw new Error('the rig did not start');
    // The attacker: kills the broker (every process of the user may signal it) and starts its own on the same data
    // directory, reading that daemon's output, where the URL and the code are printed.
    await rig.daemon.process.stop('SIGKILL');
    await rig.agent.stop();
    replacement = await startDaemon(rig.dataDir);
    const session = await signInAsProgram(replacement);
    // Its agent asks for the write that needs a person's approval, then approves it itself through the web UI.
    agent = await DrillAgent.start(rig.dataDir, 'replaced-agent');
    const card = await pendingCard({ ...rig, daemon: replacement, agent }, 'replaced');
    const refused = await viaWeb(session, '/api/approvals.approve', { ticket: card.ticket });
    expect(refused.reply).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'passphrase' } });
    expect(JSON.stringify(refused.reply)).not.toContain('proof_refusal');
    // It does not know the passphrase: guesses are refused, and the fourth waits.
    for (const guess of ['hunter2', 'password', 'postern'])
      expect((await viaWeb(session, '/auth/prove', { passphrase: guess })).reply).toMatchObject({
        error: { code: 'VAULT_PASSPHRASE_INVALID' },
      });
    const backedOff = (await viaWeb(session, '/auth/prove', { passphrase: 'letmein' })).reply as {
      error?: { code?: string; retry_after_ms?: number };
    };
    expect(backedOff).toMatchObject({ error: { code: 'PASSPHRASE_BACKOFF' } });
    const backoffEndsAt = Date.now() + (backedOff.error?.retry_after_ms ?? 0);
    expect((await viaWeb(session, '/api/approvals.approve', { ticket: card.ticket })).reply).toMatchObject({
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    expect(
      (await callOperator(rig.dataDir, 'approvals.list', {})).cards.find((c) => c.ticket === card.ticket)?.state,
    ).toBe('pending');
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([]);
    expect(rig.log.markers()).not.toContain('replaced');

    // The person, at their terminal, unlocks (which proves nothing for the attacker's tab) and decides in a tab of
    // their own that presents the passphrase: the decision is theirs, recorded so.
    await unlockAsPerson(rig.dataDir, passphrase);
    expect((await viaWeb(session, '/api/approvals.approve', { ticket: card.ticket })).reply).toMatchObject({
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    // The person's proof waits out the backoff the attacker's guesses started, as long as the broker said.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, backoffEndsAt - Date.now())));
    const next = replacement.process.stdoutLines.findLast((l) => l.startsWith('Operator UI (next sign-in): ')) ?? '';
    const person = await signInAsProgram(
      {
        origin: replacement.origin,
        token: new URL(next.slice('Operator UI (next sign-in): '.length)).searchParams.get('token') ?? '',
        signInCode: printedSignInCode(replacement.process.stdoutLines, 'Sign-in code (next sign-in): '),
      },
      passphrase,
    );
    expect((await viaWeb(person, '/api/approvals.approve', { ticket: card.ticket })).status).toBe(200);
    expect(await approvedBy(rig.dataDir, card.action_id)).toEqual([
      `by person:${os.userInfo().username} (web, passphrase in the page)`,
    ]);
    expect(await rig.log.waitForArrivals(1)).toEqual(['replaced']);
  }, 90_000);
});
