import { spawn } from 'node:child_process';
import { systemClock } from '../ports/index.js';
import { webProofFor } from './web-proof.js';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { operatorAgentClients, passphraseCharsMax, type Reply } from '../contract/index.js';
import { agentClients, agentHookup } from '../core/agent-hookup.js';
import { packageRoot } from './package-root.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { acceptedConfigDirName, acceptedConfigFileName } from './config-integrity.js';
import { controlSocketPath, sendControlRequest } from './control-socket.js';
import { sessionPath, startOperatorHttpHost, type OperatorHttpHost } from './http-host.js';
import { createOperatorHandlers, type OperatorHandlers } from './operator-handlers.js';

/** A passphrase an agent would choose and know; it must never be accepted through control.sock, nor logged. */
const agentPassphrase = 'CANARY-agent-chosen-passphrase-5d21';
const personPassphrase = 'CANARY-person-passphrase-9b07c3';
const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1, vaultKdf: 'min' as const };

let dir: TempDir;
let runtime: BrokerRuntime | undefined;
let host: OperatorHttpHost | undefined;
afterEach(async () => {
  await host?.close();
  await runtime?.close();
  host = undefined;
  runtime = undefined;
  dir.remove();
});

/** A real runtime on an empty data directory (no vault, no postern.yaml unless `yaml`), with every log line kept. */
async function freshBroker(yaml?: string): Promise<{ rt: BrokerRuntime; handlers: OperatorHandlers; lines: string[] }> {
  dir = createTempDir('pvi-');
  if (yaml !== undefined) writeFileSync(path.join(dir.path, 'postern.yaml'), yaml);
  const { logger, lines } = createCapturedLogger();
  runtime = await createBrokerRuntime({ dataDir: dir.path, ...options, logger });
  return { rt: runtime, handlers: createOperatorHandlers(runtime.broker), lines };
}

function value<T>(reply: Reply<T>): T {
  if (!reply.ok) throw new Error(`expected ok, got ${JSON.stringify(reply.error)}`);
  return reply.value;
}

/**
 * Another process of the same user (as an agent's detached child would be: not in any session's process tree)
 * writes request lines to control.sock and prints each reply line. Resolves with the parsed replies.
 */
function sameUserProcess(socketPath: string, requests: readonly unknown[]): Promise<Array<Reply<unknown>>> {
  const script = `
    const net = require('node:net');
    const [socketPath, lines] = [process.argv[1], JSON.parse(process.argv[2])];
    const socket = net.createConnection(socketPath, () => socket.write(lines.map((l) => JSON.stringify(l) + '\\n').join('')));
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk;
      if (text.split('\\n').length > lines.length) { process.stdout.write(text); socket.destroy(); }
    });
    socket.on('error', (error) => { process.stderr.write(String(error)); process.exit(2); });
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, socketPath, JSON.stringify(requests)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`the same-user process exited ${code}: ${err}`));
      else
        resolve(
          out
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => JSON.parse(line) as Reply<unknown>),
        );
    });
  });
}

/** The CONFIG_APPLIED rows of Activity (their summaries), once every append queued so far committed. */
async function configEvents(handlers: OperatorHandlers): Promise<string[]> {
  const rows = value(await handlers['activity.list']({ text: 'CONFIG_APPLIED' })).events;
  return rows.filter((row) => row.kind === 'CONFIG_APPLIED').map((row) => row.summary);
}

/** Every file under the data directory, as bytes. */
function filesUnder(root: string): Array<{ file: string; bytes: Buffer }> {
  return readdirSync(root).flatMap((name) => {
    const file = path.join(root, name);
    const stat = statSync(file);
    if (stat.isDirectory()) return filesUnder(file);
    return stat.isFile() ? [{ file, bytes: readFileSync(file) }] : [];
  });
}

describe('vault.init through the operator handlers', () => {
  it('when the data directory is fresh, a person creates the vault: unlocked at once, the first-use configuration sealed as at a first unlock', async () => {
    const yaml =
      'version: 1\nroutes:\n  - { name: docs, base_url: "https://docs.example.com", credential: docs-token, injection: bearer }\n';
    const { rt, handlers, lines } = await freshBroker(yaml);
    const web = { surface: 'web', auth: 'operator_session' } as const;
    expect(value(await handlers['vault.status']({}))).toEqual({ state: 'uninitialized', credentials: 0 });
    expect(value(await handlers['config.pending']({}, web)).trust).toBe('first_use');

    expect(value(await handlers['vault.init']({ passphrase: personPassphrase }, web))).toEqual({ state: 'unlocked' });
    expect(rt.vault.state()).toBe('unlocked');
    // The init was this vault's first unlock: the configuration found at start is now the accepted, sealed one.
    const pending = value(await handlers['config.pending']({}, web));
    expect(pending).toMatchObject({ trust: 'verified', accepted: { how: 'first_use' }, change: null });
    expect(readdirSync(path.join(dir.path, acceptedConfigDirName))).toContain(acceptedConfigFileName);
    // The journal says which file was trusted on first use, and that no person accepted it.
    expect(await configEvents(handlers)).toEqual([`first_use by trust on first use: ${pending.accepted?.digest}`]);
    // The passphrase opens it: a lock and an unlock with it work; a second init is refused and changes nothing.
    expect(value(await handlers['vault.lock']({}, web))).toEqual({ state: 'locked' });
    expect(value(await handlers['vault.unlock']({ passphrase: personPassphrase }, web))).toEqual({ state: 'unlocked' });
    expect(await handlers['vault.init']({ passphrase: agentPassphrase }, web)).toMatchObject({
      ok: false,
      error: { code: 'VAULT_ALREADY_INITIALIZED' },
    });
    expect(await rt.vault.verifyPassphrase(Buffer.from(personPassphrase))).toBe(true);
    expect(await rt.vault.verifyPassphrase(Buffer.from(agentPassphrase))).toBe(false);

    expect(lines.some((line) => line.includes('vault created (operator)'))).toBe(true);
    expect(lines.join('')).not.toContain(personPassphrase);
    expect(lines.join('')).not.toContain(agentPassphrase);
    for (const { file, bytes } of filesUnder(dir.path))
      expect(bytes.includes(Buffer.from(personPassphrase)), `${file} holds the passphrase`).toBe(false);
  });

  it('when the fresh file turns on the unattended opt-out, the first unlock seals nothing: a person accepts it first (THREAT-MODEL 3)', async () => {
    const yaml = 'version: 1\noperator: { unattended_decisions: true }\n';
    const { handlers } = await freshBroker(yaml);
    const web = { surface: 'web', auth: 'operator_session' } as const;
    expect(value(await handlers['vault.init']({ passphrase: personPassphrase }, web))).toEqual({ state: 'unlocked' });
    const pending = value(await handlers['config.pending']({}, web));
    expect(pending).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      accept_applies: 'now',
      untrusted_reason: expect.stringMatching(/unattended_decisions/),
      change: {
        settings: [
          expect.objectContaining({
            name: 'operator',
            fields: [{ field: 'unattended_decisions', before: 'false', after: 'true' }],
          }),
        ],
      },
    });
    expect(readdirSync(dir.path)).not.toContain(acceptedConfigDirName);
    expect(await configEvents(handlers)).toEqual([]);
    // A person's acceptance of exactly this file is in force at once, and journaled as theirs.
    const digest = pending.change?.digest ?? '';
    expect(value(await handlers['config.accept']({ digest }, web))).toMatchObject({ digest, applies: 'now' });
    expect(value(await handlers['config.pending']({}, web))).toMatchObject({
      trust: 'verified',
      accepted: { how: 'accepted' },
    });
    expect(await configEvents(handlers)).toEqual([expect.stringMatching(/^accepted by person:/)]);
  });

  it('refuses a passphrase as `postern vault init` does (under 8 bytes, over the bound, empty), naming the field and never quoting it', async () => {
    const { rt, handlers } = await freshBroker();
    const person = { surface: 'desktop', auth: 'desktop_confirmed' } as const;
    const cases: Array<[string, string]> = [
      ['short7!', 'INVALID_ARGUMENT'],
      ['', 'INVALID_ARGUMENT'],
      [`CANARY${'x'.repeat(passphraseCharsMax)}`, 'INVALID_ARGUMENT'],
    ];
    for (const [passphrase, code] of cases) {
      const reply = await handlers['vault.init']({ passphrase }, person);
      expect(reply, passphrase.slice(0, 10)).toMatchObject({ ok: false, error: { code, field: 'passphrase' } });
      if (passphrase !== '') expect(JSON.stringify(reply)).not.toContain(passphrase);
    }
    expect(await handlers['vault.init']({ passphrase: personPassphrase, extra: 1 }, person)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_ARGUMENT' },
    });
    // A surface that does not say who decides is refused before the vault is touched.
    expect(await handlers['vault.init']({ passphrase: personPassphrase })).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    expect(rt.vault.state()).toBe('uninitialized');
  });

  it('creates the vault from the signed-in operator UI (HTTP host), and the reply carries only the state', async () => {
    const { rt, handlers, lines } = await freshBroker();
    host = await startOperatorHttpHost({
      handlers,
      proof: webProofFor(rt, systemClock),
      rendererDir: path.join(dir.path, 'no-renderer'),
      port: 0,
    });
    const signIn = await fetch(`${host.origin}${sessionPath}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: host.token, code: host.signInCode }),
    });
    const { session } = ((await signIn.json()) as { value: { session: string } }).value;
    const post = (method: string, input: unknown, auth = `Bearer ${session}`): Promise<Response> =>
      fetch(`${host?.origin}/api/${method}`, {
        method: 'POST',
        headers: { Authorization: auth, 'Content-Type': 'application/json' },
        body: JSON.stringify(input),
      });
    // Without the session: refused, nothing created.
    expect((await post('vault.init', { passphrase: agentPassphrase }, 'Bearer nope')).status).toBe(401);
    expect(rt.vault.state()).toBe('uninitialized');
    const created = await post('vault.init', { passphrase: personPassphrase });
    const text = await created.text();
    expect(JSON.parse(text)).toEqual({ ok: true, value: { state: 'unlocked' } });
    expect(text).not.toContain(personPassphrase);
    expect(lines.join('')).not.toContain(personPassphrase);
  });
});

describe('vault.init on the control socket (THREAT-MODEL 3: only a person decides)', () => {
  it('when a same-user process asks over control.sock, it is refused whatever it brings (no proof, a proof, the unattended opt-out); the vault stays uninitialized', async () => {
    const yaml = 'version: 1\noperator: { unattended_decisions: true }\n';
    const { rt } = await freshBroker(yaml);
    const socket = controlSocketPath(dir.path);
    const replies = await sameUserProcess(socket, [
      { op: 'api', method: 'vault.init', input: { passphrase: agentPassphrase } },
      {
        op: 'api',
        method: 'vault.init',
        input: { passphrase: agentPassphrase },
        proof: { passphrase: agentPassphrase },
      },
      { op: 'vault_status' },
    ]);
    expect(replies).toHaveLength(3);
    for (const reply of replies.slice(0, 2)) {
      expect(reply).toMatchObject({ ok: false, error: { code: 'UNSUPPORTED_ACTION', field: 'method' } });
      expect(reply.ok ? '' : reply.error.message).toContain('postern vault init');
      expect(JSON.stringify(reply)).not.toContain(agentPassphrase);
    }
    expect(replies[2]).toEqual({ ok: true, value: { state: 'uninitialized', credentials: 0 } });
    expect(rt.vault.state()).toBe('uninitialized');
    // Still nothing to unlock with the agent's passphrase: no vault exists.
    expect(await sendControlRequest(socket, { op: 'unlock', passphrase: agentPassphrase })).toMatchObject({
      ok: false,
      error: { code: 'VAULT_NOT_INITIALIZED' },
    });
  });

  it('refuses it as well once a vault exists (the same refusal, not VAULT_ALREADY_INITIALIZED, so the socket reveals nothing new)', async () => {
    const { rt, handlers } = await freshBroker();
    value(await handlers['vault.init']({ passphrase: personPassphrase }, { surface: 'web', auth: 'operator_session' }));
    const [reply] = await sameUserProcess(controlSocketPath(dir.path), [
      { op: 'api', method: 'vault.init', input: { passphrase: agentPassphrase } },
    ]);
    expect(reply).toMatchObject({ ok: false, error: { code: 'UNSUPPORTED_ACTION' } });
    expect(await rt.vault.verifyPassphrase(Buffer.from(personPassphrase))).toBe(true);
  });
});

describe('agent.hookup', () => {
  it('answers every known client with the same lines `postern agent-config` prints, for this broker (absolute node, bin and data dir)', async () => {
    const { handlers } = await freshBroker();
    const hookup = value(await handlers['agent.hookup']({}));
    const bin = path.join(packageRoot, 'bin', 'postern.mjs');
    expect(hookup.data_dir).toBe(dir.path);
    expect(hookup.note).toBeNull();
    expect(hookup.clients.map((c) => c.client)).toEqual([...operatorAgentClients]);
    expect(Object.keys(agentClients)).toEqual([...operatorAgentClients]);
    for (const entry of hookup.clients) {
      expect(entry).toEqual({
        client: entry.client,
        ...agentHookup(entry.client, { node: process.execPath, bin, dataDir: dir.path }),
      });
    }
    expect(hookup.clients[0]?.text).toBe(
      `claude mcp add postern -- ${process.execPath} --inspect-port=192.0.2.1:9229 ${bin} mcp --data-dir ${dir.path}`,
    );
    // A read: the control socket answers it without any proof.
    const [reply] = await sameUserProcess(controlSocketPath(dir.path), [
      { op: 'api', method: 'agent.hookup', input: {} },
    ]);
    expect(reply).toEqual({ ok: true, value: hookup });
  });
});
