import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { systemClock } from '../ports/index.js';
import { openVault } from '../vault/index.js';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { provePath, sessionPath, startOperatorHttpHost, type OperatorHttpHost } from './http-host.js';
import { createOperatorHandlers } from './operator-handlers.js';
import { webProofFor } from './web-proof.js';

/**
 * THREAT-MODEL 3 on the web: the sign-in code proves only that the caller read the daemon's output (an agent that
 * starts its own daemon reads it), so a signed-in tab decides only after it presented the vault passphrase in this run.
 * The daemon-level attack (kill the person's daemon, start one, sign in with what it prints) is tests/operator-proof.
 */
const passphrase = 'web proof passphrase (test only)';

let dir: TempDir | undefined;
let runtime: BrokerRuntime | undefined;
let host: OperatorHttpHost | undefined;

afterEach(async () => {
  await host?.close();
  await runtime?.close();
  dir?.remove();
  host = undefined;
  runtime = undefined;
  dir = undefined;
});

/** A real runtime over a vault a person created (fast KDF, test only), unlocked at start from a file or left locked. */
async function start(unlock: 'locked' | 'from a file'): Promise<{ host: OperatorHttpHost; runtime: BrokerRuntime }> {
  dir = createTempDir('pwproof-');
  const dataDir = path.join(dir.path, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  await vault.close();
  runtime = await createBrokerRuntime({
    dataDir,
    mode: 'headless',
    version: '1',
    startedAtMs: 1,
    vaultKdf: 'min',
    ...(unlock === 'from a file' ? { vaultPassphrase: Buffer.from(passphrase) } : {}),
  });
  host = await startOperatorHttpHost({
    handlers: createOperatorHandlers(runtime.broker),
    proof: webProofFor(runtime, systemClock),
    rendererDir: path.join(dir.path, 'no-renderer'),
    port: 0,
  });
  return { host, runtime };
}

async function signIn(on: OperatorHttpHost): Promise<string> {
  // The URL and code printed last (each sign-in rotates them, as the daemon's terminal shows).
  const { url, code } = on.currentSignIn();
  const token = new URL(url).searchParams.get('token');
  const answer = await fetch(`${on.origin}${sessionPath}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token, code }),
  });
  const reply = (await answer.json()) as { ok: boolean; value: { session: string } };
  if (!reply.ok) throw new Error(`sign-in refused: ${answer.status}`);
  return reply.value.session;
}

interface Answered {
  status: number;
  reply: { ok: boolean; value?: unknown; error?: { code: string; proof_refusal?: string; message: string } };
}

async function post(on: OperatorHttpHost, session: string, pathname: string, body: unknown): Promise<Answered> {
  const answer = await fetch(`${on.origin}${pathname}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session}` },
    body: JSON.stringify(body),
  });
  return { status: answer.status, reply: (await answer.json()) as Answered['reply'] };
}

/** A decision that reaches its handler only with a person's proof: NOT_FOUND there (no such ticket), refused before. */
const approveNothing = (on: OperatorHttpHost, session: string): Promise<Answered> =>
  post(on, session, '/api/approvals.approve', { ticket: 999 });

describe('a signed-in tab of a daemon whose vault a person unlocks', () => {
  it('decides nothing until it presents the vault passphrase, which a wrong one does not give; the proof is its own', async () => {
    const { host: on, runtime: rt } = await start('locked');
    const session = await signIn(on);
    const refused = await approveNothing(on, session);
    expect(refused.reply).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'passphrase' } });
    expect(refused.reply.error?.proof_refusal).toBeUndefined();
    expect(refused.reply.error?.message).toMatch(/sign-in code proves no person/);
    // Nothing else decides either: a lock from this tab changes nothing.
    expect((await post(on, session, '/api/vault.lock', {})).reply).toMatchObject({
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });

    const wrong = await post(on, session, provePath, { passphrase: 'not it' });
    expect(wrong.reply).toMatchObject({ ok: false, error: { code: 'VAULT_PASSPHRASE_INVALID', field: 'passphrase' } });
    expect((await approveNothing(on, session)).reply).toMatchObject({ error: { code: 'OPERATOR_PROOF_REQUIRED' } });

    expect((await post(on, session, provePath, { passphrase })).reply).toEqual({ ok: true, value: { proven: true } });
    // Reached the handler: no ticket 999.
    expect((await approveNothing(on, session)).reply).toMatchObject({ error: { code: 'NOT_FOUND' } });
    // Another tab signed in with the next printed URL has proven nothing.
    const other = await signIn(on);
    expect((await approveNothing(on, other)).reply).toMatchObject({ error: { code: 'OPERATOR_PROOF_REQUIRED' } });
    expect(rt.vault.state()).toBe('locked');
  });

  it("proves the tab by the page's own unlock when it opens the vault, not by a wrong one", async () => {
    const { host: on, runtime: rt } = await start('locked');
    const session = await signIn(on);
    expect((await post(on, session, '/api/vault.unlock', { passphrase: 'not it' })).reply).toMatchObject({
      error: { code: 'VAULT_PASSPHRASE_INVALID' },
    });
    expect((await approveNothing(on, session)).reply).toMatchObject({ error: { code: 'OPERATOR_PROOF_REQUIRED' } });
    expect((await post(on, session, '/api/vault.unlock', { passphrase })).reply).toMatchObject({ ok: true });
    expect(rt.vault.state()).toBe('unlocked');
    expect((await approveNothing(on, session)).reply).toMatchObject({ error: { code: 'NOT_FOUND' } });
  });

  it('makes a guesser wait after three wrong passphrases (the right one too), and a request with no session proves nothing', async () => {
    const { host: on } = await start('locked');
    const session = await signIn(on);
    for (let i = 0; i < 3; i += 1)
      expect((await post(on, session, provePath, { passphrase: `guess ${i}` })).reply).toMatchObject({
        error: { code: 'VAULT_PASSPHRASE_INVALID' },
      });
    const waited = await post(on, session, provePath, { passphrase });
    expect(waited.reply).toMatchObject({ ok: false, error: { code: 'PASSPHRASE_BACKOFF' } });
    expect((await approveNothing(on, session)).reply).toMatchObject({ error: { code: 'OPERATOR_PROOF_REQUIRED' } });
    const anonymous = await fetch(`${on.origin}${provePath}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ passphrase }),
    });
    expect(anonymous.status).toBe(401);
    expect(
      (await post(on, session, provePath, { passphrase: '' })).reply.error?.code,
      'an empty passphrase is bad input',
    ).toBe('INVALID_ARGUMENT');
  });

  it('takes no decision from a proven tab once a passphrase was read from a file in this run', async () => {
    const { host: on, runtime: rt } = await start('locked');
    const session = await signIn(on);
    expect((await post(on, session, provePath, { passphrase })).reply).toMatchObject({ ok: true });
    rt.passphraseSource.readFromFile();
    expect((await approveNothing(on, session)).reply).toMatchObject({
      error: { code: 'OPERATOR_PROOF_REQUIRED', proof_refusal: 'passphrase_from_file' },
    });
  });
});

describe('a signed-in tab of a daemon started from a passphrase file', () => {
  it('decides nothing: neither the proof nor the page unlock takes a passphrase every process of the user can read', async () => {
    const { host: on, runtime: rt } = await start('from a file');
    expect(rt.vault.state()).toBe('unlocked');
    const session = await signIn(on);
    const fromFile = { error: { code: 'OPERATOR_PROOF_REQUIRED', proof_refusal: 'passphrase_from_file' } };
    expect((await approveNothing(on, session)).reply).toMatchObject(fromFile);
    expect((await post(on, session, provePath, { passphrase })).reply).toMatchObject(fromFile);
    // The unlock itself still works (the vault stays usable), but proves nobody.
    expect((await post(on, session, '/api/vault.unlock', { passphrase })).reply).toMatchObject({ ok: true });
    expect((await approveNothing(on, session)).reply).toMatchObject(fromFile);
    expect((await post(on, session, '/api/vault.lock', {})).reply).toMatchObject(fromFile);
    expect(rt.vault.state()).toBe('unlocked');
  });
});
