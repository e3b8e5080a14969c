import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { brokerStatusSchema, type BrokerStatus } from '../broker/contract/index.js';
import { sendControlRequest } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import {
  lineWaitMs,
  PosternProcess,
  posternBin,
  repoRoot,
  runPostern,
  signInAsProgram,
  startDaemon,
  type CommandRun,
  type RunningDaemon,
} from './support/postern-process.js';
import { runOnTerminal } from './support/operator-terminal.js';

/**
 * The vault through real `postern` subprocesses and a real daemon: every command, the control
 * socket, the status API. Secret values are canaries; at the end none may appear in any output, in
 * any file of the data directory (database, -wal, -shm), in `list --json`, or in any argv.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pvc-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const canary = `CANARY-vault-${randomBytes(12).toString('hex')}`;
const rotatedCanary = `CANARY-vault-rotated-${randomBytes(12).toString('hex')}`;
const keyPassphrase = `CANARY-keypass-${randomBytes(8).toString('hex')}`;
const passphrase = `CANARY-passphrase-${randomBytes(8).toString('hex')}`;
const dataDir = path.join(scratch, 'data');
const initDir = path.join(scratch, 'init');
const secretsDir = path.join(scratch, 'secrets');
const passphraseFile = path.join(secretsDir, 'passphrase');
const wrongPassphraseFile = path.join(secretsDir, 'wrong');
const keyPassphraseFile = path.join(secretsDir, 'key-passphrase');
const keyFile = path.join(secretsDir, 'id_ed25519');

/** Every argv we ran and everything any process printed, for the final canary sweep. */
const argvs: string[][] = [];
const outputs: string[] = [];

/** Runs `postern …` detached (no controlling terminal), recording the argv and the output for the canary sweep. */
async function run(args: string[], stdin = '', env: Record<string, string> = {}): Promise<CommandRun> {
  argvs.push(args);
  const result = await runPostern(args, { stdin, env });
  outputs.push(result.stdout, result.stderr);
  return result;
}

const vault = (...args: string[]): string[] => ['vault', ...args, '--data-dir', dataDir];
const withPassphrase = (...args: string[]): string[] => [...vault(...args), '--passphrase-file', passphraseFile];

/** The printed token and code sign in once (POST /auth/session); the session secret is kept per daemon. */
const sessions = new WeakMap<RunningDaemon, Promise<string>>();
function sessionOf(daemon: RunningDaemon): Promise<string> {
  const known = sessions.get(daemon);
  if (known !== undefined) return known;
  const signIn = signInAsProgram(daemon);
  sessions.set(daemon, signIn);
  return signIn;
}

async function statusOf(daemon: RunningDaemon): Promise<BrokerStatus> {
  const answer = await fetch(`${daemon.origin}/api/status`, {
    headers: { Authorization: `Bearer ${await sessionOf(daemon)}` },
  });
  const reply = (await answer.json()) as { ok: true; value: unknown };
  return brokerStatusSchema.parse(reply.value);
}

async function stopped(daemon: RunningDaemon): Promise<void> {
  await daemon.process.stop();
  outputs.push(daemon.process.stdout, daemon.process.stderr);
}

/** Every regular file under the data directory, with its bytes (sockets are skipped). */
function filesOf(dir: string): [string, Buffer][] {
  return readdirSync(dir).flatMap((name): [string, Buffer][] => {
    const full = path.join(dir, name);
    const stat = lstatSync(full);
    if (stat.isDirectory()) return filesOf(full);
    return stat.isFile() ? [[full, readFileSync(full)]] : [];
  });
}

describe.sequential('postern vault, end to end', { timeout: 120_000 }, () => {
  it('prepares secrets in files and a real encrypted ed25519 key from ssh-keygen', () => {
    execFileSync('mkdir', ['-m', '700', '-p', secretsDir, dataDir]);
    writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
    writeFileSync(wrongPassphraseFile, 'definitely not the passphrase\n', { mode: 0o600 });
    writeFileSync(keyPassphraseFile, `${keyPassphrase}\n`, { mode: 0o600 });
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', keyPassphrase, '-C', 'vault-test', '-f', keyFile]);
    expect(readFileSync(keyFile, 'utf8')).toContain('OPENSSH PRIVATE KEY');
  });

  it('init creates the vault (Argon2id moderate, the real default) and refuses to do it twice', async () => {
    const init = ['vault', 'init', '--data-dir', initDir, '--passphrase-file', passphraseFile];
    const first = await run(init);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toContain('Vault created');
    const again = await run(init);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('postern: VAULT_ALREADY_INITIALIZED');
    const unlock = await run(['vault', 'unlock', '--data-dir', initDir, '--passphrase-file', passphraseFile]);
    expect(unlock.code).toBe(0);
    // The flow below uses a vault created at libsodium's minimum Argon2id cost (still Argon2id),
    // so the many unlocks of its subprocesses stay fast; the default cost was exercised just above.
    const fast = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await fast.init(Buffer.from(passphrase));
    await fast.close();
  });

  it('add takes each kind from stdin, never from argv', async () => {
    const adds: [string[], string][] = [
      [['add', 'api', '--kind', 'bearer', '--bind', 'api.example.com', '--from-stdin'], `${canary}\n`],
      [
        [
          'add',
          'dd',
          '--kind',
          'header',
          '--header',
          'DD-API-KEY',
          '--template',
          'Key {secret}',
          '--bind',
          'api.datadoghq.com',
          '--from-stdin',
        ],
        canary,
      ],
      [['add', 'registry', '--kind', 'basic', '--bind', 'registry.local', '--from-stdin'], `ann:${canary}`],
      [['add', 'maps', '--kind', 'query', '--param', 'key', '--bind', 'maps.example.com', '--from-stdin'], canary],
      [
        [
          'add',
          'deploy',
          '--kind',
          'ssh_key',
          '--bind',
          'web-1',
          '--from-stdin',
          '--key-passphrase-file',
          keyPassphraseFile,
        ],
        readFileSync(keyFile, 'utf8'),
      ],
    ];
    for (const [args, stdin] of adds) {
      const result = await run(withPassphrase(...args), stdin);
      expect(result, result.stderr).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout).toMatch(/^Added /);
    }
    // A taken name: nothing is overwritten, and the refusal says how to replace the secret.
    const again = await run(
      withPassphrase('add', 'api', '--kind', 'bearer', '--bind', 'x.example', '--from-stdin'),
      's',
    );
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('CREDENTIAL_EXISTS');
    expect(again.stderr).toContain('postern vault rotate api --from-stdin');
  });

  it('add without --from-stdin, or with a bad template, is a coded usage error naming the flag', async () => {
    const noStdin = await run(withPassphrase('add', 'x', '--kind', 'bearer'));
    expect(noStdin.code).toBe(2);
    expect(noStdin.stderr).toContain('postern: INVALID_ARGUMENT --from-stdin:');
    const badTemplate = await run(
      withPassphrase('add', 'x', '--kind', 'header', '--header', 'X-K', '--template', 'no placeholder', '--from-stdin'),
      'v',
    );
    expect(badTemplate.code).toBe(2);
    expect(badTemplate.stderr).toContain('postern: INVALID_ARGUMENT --template:');
    const wrongKeyPass = await run(
      withPassphrase('add', 'k2', '--kind', 'ssh_key', '--from-stdin', '--key-passphrase-file', wrongPassphraseFile),
      readFileSync(keyFile, 'utf8'),
    );
    expect(wrongKeyPass.code).toBe(2);
    expect(wrongKeyPass.stderr).toContain('postern: INVALID_ARGUMENT --key-passphrase-file:');
  });

  it('with no passphrase file and no terminal, a command that needs the passphrase says how to give it', async () => {
    const result = await run(vault('add', 'x', '--kind', 'bearer', '--from-stdin'), 'v');
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('postern: INVALID_ARGUMENT --passphrase-file: no passphrase');
  });

  it('rotate changes the version tag', async () => {
    const before = JSON.parse((await run(vault('list', '--json'))).stdout) as {
      credentials: { name: string; version_tag: string }[];
    };
    const result = await run(withPassphrase('rotate', 'api', '--from-stdin'), rotatedCanary);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const after = JSON.parse((await run(vault('list', '--json'))).stdout) as {
      credentials: { name: string; version_tag: string }[];
    };
    const tag = (list: typeof after, name: string) => list.credentials.find((c) => c.name === name)?.version_tag;
    expect(tag(after, 'api')).not.toBe(tag(before, 'api'));
    expect(tag(after, 'dd')).toBe(tag(before, 'dd'));
  });

  it('list shows names, kinds, versions and bindings without a passphrase, in text and JSON', async () => {
    const files = readdirSync(dataDir).sort();
    const text = await run(vault('list'));
    expect(text.code).toBe(0);
    // Read as it is: no -wal or -shm appears beside the file, nothing is migrated or written.
    expect(readdirSync(dataDir).sort()).toEqual(files);
    expect(text.stdout).toContain('Vault: locked (no broker running), 5 credentials');
    expect(text.stdout).toMatch(
      /dd \(header, header DD-API-KEY, version v1-[0-9a-f]{8}, cred_[0-9a-f]{24}\) → api\.datadoghq\.com/,
    );
    const json = JSON.parse((await run(vault('list', '--json'))).stdout) as {
      state: string;
      broker_running: boolean;
      credentials: { name: string; kind: string; bindings: string[] }[];
    };
    expect(json.state).toBe('locked');
    expect(json.broker_running).toBe(false);
    expect(json.credentials.map((c) => [c.name, c.kind, c.bindings])).toEqual([
      ['api', 'bearer', ['api.example.com']],
      ['dd', 'header', ['api.datadoghq.com']],
      ['deploy', 'ssh_key', ['web-1']],
      ['maps', 'query', ['maps.example.com']],
      ['registry', 'basic', ['registry.local']],
    ]);
  });

  it('list on a data directory with no vault, or an empty vault file, says uninitialized and writes nothing', async () => {
    const empty = path.join(scratch, 'no-vault');
    mkdirSync(empty, { mode: 0o700 });
    const text = await run(['vault', 'list', '--data-dir', empty]);
    expect(text).toMatchObject({ code: 0, stdout: 'Vault: uninitialized (no broker running), 0 credentials\n' });
    const json = JSON.parse((await run(['vault', 'list', '--json', '--data-dir', empty])).stdout) as unknown;
    expect(json).toEqual({ state: 'uninitialized', broker_running: false, credentials: [] });
    expect(readdirSync(empty)).toEqual([]);
    // An empty vault.sqlite (the store creates it before SQLite writes a page; an open that failed leaves it): the
    // same answer, as opening the vault gave, and the file stays as it was.
    writeFileSync(path.join(empty, 'vault.sqlite'), '', { mode: 0o600 });
    expect(await run(['vault', 'list', '--data-dir', empty])).toMatchObject({
      code: 0,
      stdout: 'Vault: uninitialized (no broker running), 0 credentials\n',
    });
    expect(readdirSync(empty)).toEqual(['vault.sqlite']);
    expect(statSync(path.join(empty, 'vault.sqlite')).size).toBe(0);
  });

  it('bind replaces the bindings with the passphrase; without one, with none named, or with a bad host nothing changes', async () => {
    const bindingsOf = async (name: string): Promise<string[] | undefined> =>
      (
        JSON.parse((await run(vault('list', '--json'))).stdout) as {
          credentials: { name: string; bindings: string[] }[];
        }
      ).credentials.find((c) => c.name === name)?.bindings;
    const unproven = await run(vault('bind', 'maps', '--bind', 'evil.example'));
    expect(unproven.code).toBe(2);
    expect(unproven.stderr).toContain('postern: INVALID_ARGUMENT --passphrase-file: no passphrase');
    const none = await run(withPassphrase('bind', 'maps'));
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('postern: INVALID_ARGUMENT --bind:');
    const bad = await run(withPassphrase('bind', 'maps', '--bind', 'maps.example.com', '--bind', 'not a host/'));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('postern: INVALID_ARGUMENT --bind:');
    expect(await bindingsOf('maps')).toEqual(['maps.example.com']);
    const rebound = await run(
      withPassphrase('bind', 'maps', '--bind', 'maps.example.com', '--bind', 'tiles.example.com'),
    );
    expect(rebound.code, rebound.stderr).toBe(0);
    expect(rebound.stdout).toMatch(
      /^Rebound maps \(query, param key, version v1-[0-9a-f]{8}, cred_[0-9a-f]{24}\) → maps\.example\.com, tiles\.example\.com$/m,
    );
    expect(await bindingsOf('maps')).toEqual(['maps.example.com', 'tiles.example.com']);
  });

  it('unlock with no broker running checks the passphrase, says nothing stays unlocked, and exits 0; a wrong one fails', async () => {
    const right = await run(withPassphrase('unlock'));
    expect(right).toMatchObject({ code: 0, stderr: '' });
    expect(right.stdout).toContain('No broker is running');
    const wrong = await run([...vault('unlock'), '--passphrase-file', wrongPassphraseFile]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('postern: VAULT_PASSPHRASE_INVALID --passphrase-file:');
    const lock = await run(vault('lock'));
    expect(lock).toMatchObject({ code: 0 });
    expect(lock.stdout).toContain('No broker is running');
  });

  it('a running daemon starts locked, is unlocked and locked through its 0600 control socket, and its status shows it', async () => {
    const daemon = await startDaemon(dataDir);
    try {
      const socket = statSync(path.join(dataDir, 'control.sock'));
      expect(socket.isSocket()).toBe(true);
      expect(socket.mode & 0o777).toBe(0o600);
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'locked' });

      const wrong = await run([...vault('unlock'), '--passphrase-file', wrongPassphraseFile]);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain('postern: VAULT_PASSPHRASE_INVALID');
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'locked' });

      // Typed on a terminal: an unlock read from a file would leave this broker refusing passphrase proofs for the rest
      // of its run (docs/vault.md, "A passphrase file proves no person"), and the lock below is proven on a terminal.
      const right = await runOnTerminal([...vault('unlock')], readFileSync(passphraseFile, 'utf8').trim());
      expect(right.prompted).toBe(true);
      expect(right.code, right.screen).toBe(0);
      expect(right.screen).toContain('Vault unlocked in the running broker.');
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'unlocked' });

      // The CLI writes vault.sqlite beside the running daemon; the daemon's listing sees it.
      const added = await run(withPassphrase('add', 'late', '--kind', 'bearer', '--from-stdin'), canary);
      expect(added.code).toBe(0);
      // Asked through the control socket, so this is the daemon's own (in-memory) vault answering.
      expect(await sendControlRequest(path.join(dataDir, 'control.sock'), { op: 'vault_status' })).toEqual({
        ok: true,
        value: { state: 'unlocked', credentials: 6 },
      });
      // list reports the running broker's state, not the CLI process's own (always locked) view.
      expect((await run(vault('list'))).stdout).toContain('Vault: unlocked (in the running broker), 6 credentials');

      // Locking is a decision: without a terminal to prove a person on, it is refused (issue 14).
      const unproven = await run(vault('lock'));
      expect(unproven.code).toBe(1);
      expect(unproven.stderr).toContain('OPERATOR_PROOF_REQUIRED');
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'unlocked' });
      const lock = await runOnTerminal([...vault('lock')], readFileSync(passphraseFile, 'utf8').trim());
      expect(lock.prompted).toBe(true);
      expect(lock.code, lock.screen).toBe(0);
      expect(lock.screen).toContain('Vault locked in the running broker.');
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'locked' });

      const second = new PosternProcess(['daemon', '--data-dir', dataDir, '--port', '0']);
      argvs.push(['daemon', '--data-dir', dataDir, '--port', '0']);
      expect((await second.exitWithin()).code).toBe(1);
      expect(second.stderr).toContain(
        `postern: BROKER_ALREADY_RUNNING --data-dir: another Postern broker (pid ${daemon.process.child.pid},`,
      );
    } finally {
      await stopped(daemon);
    }
  });

  it('a daemon given --passphrase-file starts unlocked; a wrong one does not start', async () => {
    argvs.push(['daemon', '--passphrase-file', passphraseFile]);
    const daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
    try {
      expect((await statusOf(daemon)).vault).toMatchObject({ state: 'unlocked' });
      expect(daemon.process.stdout).toContain('Vault: unlocked');
    } finally {
      await stopped(daemon);
    }
    const wrong = await run(['daemon', '--data-dir', dataDir, '--port', '0', '--passphrase-file', wrongPassphraseFile]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('postern: VAULT_PASSPHRASE_INVALID');
  });

  it('remove needs the passphrase, then deletes a credential; an unknown name is a coded error that does not echo it', async () => {
    // An agent without the passphrase (no terminal, no file) cannot take a credential away.
    const unproven = await run(vault('remove', 'late'));
    expect(unproven.code).toBe(2);
    expect(unproven.stderr).toContain('postern: INVALID_ARGUMENT --passphrase-file: no passphrase');
    const wrong = await run([...vault('remove', 'late'), '--passphrase-file', wrongPassphraseFile]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('postern: VAULT_PASSPHRASE_INVALID --passphrase-file:');
    expect(
      JSON.parse((await run(vault('list', '--json'))).stdout).credentials.map((c: { name: string }) => c.name),
    ).toContain('late');
    expect((await run(withPassphrase('remove', 'late'))).code).toBe(0);
    expect(
      JSON.parse((await run(vault('list', '--json'))).stdout).credentials.map((c: { name: string }) => c.name),
    ).not.toContain('late');
    const unknown = await run(withPassphrase('remove', 'late'));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('postern: UNKNOWN_CREDENTIAL NAME: no credential by that name\n');
  });

  it('CANARY: no secret, key or passphrase appears in any output, any file of the data dir, list --json, or any argv', async () => {
    const keyBody = readFileSync(keyFile, 'utf8').split('\n')[2] ?? '';
    expect(keyBody.length).toBeGreaterThan(40);
    const needles = [canary, rotatedCanary, keyPassphrase, passphrase, keyBody];
    const list = (await run(vault('list', '--json'))).stdout;
    const files = [...filesOf(dataDir), ...filesOf(initDir)];
    expect(files.map(([file]) => path.basename(file))).toEqual(
      expect.arrayContaining(['vault.sqlite', 'journal.sqlite']),
    );
    for (const needle of needles) {
      expect(list).not.toContain(needle);
      for (const output of outputs) expect(output).not.toContain(needle);
      for (const [file, bytes] of files)
        expect(bytes.includes(needle), `${needle.slice(0, 20)}… in ${file}`).toBe(false);
      for (const argv of argvs) expect(argv.join(' ')).not.toContain(needle);
    }
    for (const [file] of files.filter(([name]) => path.basename(name).startsWith('vault.sqlite')))
      expect(statSync(file).mode & 0o777, file).toBe(0o600);
  });
});

/**
 * The terminal prompt, through a real pseudo-terminal (util-linux `script`): the passphrase is
 * typed after the prompt appears (waiting on output, not time) and must not be echoed back.
 */
const scriptBin = ['/usr/bin/script', '/bin/script'].find((candidate) => {
  try {
    return statSync(candidate).isFile();
  } catch {
    return false;
  }
});

describe.skipIf(scriptBin === undefined)('postern vault unlock on a terminal', { timeout: 60_000 }, () => {
  function typeAtPrompt(args: string[], typed: string): Promise<CommandRun> {
    argvs.push(args);
    const command = [process.execPath, posternBin, ...args]
      .map((part) => `'${part.replaceAll("'", "'\\''")}'`)
      .join(' ');
    return new Promise((resolve, reject) => {
      const child = spawn(scriptBin ?? 'script', ['-qec', command, '/dev/null'], {
        cwd: repoRoot,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let sent = false;
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        if (!sent && stdout.includes('passphrase:')) {
          sent = true;
          child.stdin.write(`${typed}\r`);
        }
      });
      const deadline = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`no exit within ${lineWaitMs} ms:\n${stdout}`));
      }, lineWaitMs);
      child.on('close', (code) => {
        clearTimeout(deadline);
        outputs.push(stdout);
        resolve({ code, stdout, stderr: '' });
      });
    });
  }

  it('asks without echo and accepts the right passphrase; a wrong one fails', async () => {
    const dir = path.join(scratch, 'tty');
    execFileSync('mkdir', ['-m', '700', '-p', dir]);
    const fast = await openVault({ dataDir: dir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await fast.init(Buffer.from(passphrase));
    await fast.close();
    const right = await typeAtPrompt(['vault', 'unlock', '--data-dir', dir], passphrase);
    expect(right.code).toBe(0);
    expect(right.stdout).toContain('Vault passphrase:');
    expect(right.stdout).toContain('The passphrase is correct.');
    expect(right.stdout).not.toContain(passphrase);
    const wrong = await typeAtPrompt(['vault', 'unlock', '--data-dir', dir], 'not-the-passphrase');
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain('VAULT_PASSPHRASE_INVALID');
    expect(wrong.stdout).not.toContain('not-the-passphrase');
  });
});
