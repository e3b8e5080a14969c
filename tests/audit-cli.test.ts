import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { Journal } from '../broker/journal/index.js';
import { verifyStartLineRowsMin } from '../broker/cli/audit-commands.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { writeBulkAuditJournal } from '../broker/testing/bulk-audit-journal.js';
import { FakeClock } from '../broker/testing/fake-clock.js';
import { swapKeyAndRewrite } from '../broker/testing/key-swap-attack.js';
import { openVault } from '../broker/vault/index.js';
import { PosternProcess } from './support/postern-process.js';

/**
 * `postern audit …` as a real subprocess over a journal written by the real journal and vault. The cases that run
 * five or more subprocesses get 90 s: each is a second or more on a loaded machine.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-audit-cli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const passphrase = 'correct horse battery staple';
const passphraseFile = path.join(scratch, 'passphrase');
writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });

async function run(args: readonly string[]) {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

/** A data dir whose vault is initialized; `locked` events are appended while the vault is locked. */
async function dataDirWithEvents(unlocked: number, locked: number): Promise<string> {
  const dataDir = path.join(scratch, `data-${Math.random().toString(36).slice(2)}`);
  mkdirSync(dataDir, { mode: 0o700 });
  const clock = new FakeClock();
  const vault = await openVault({ dataDir, clock, kdf: 'min', idleLockMs: 0 });
  const journal = await Journal.open({ dataDir, clock, vault });
  await vault.init(Buffer.from(passphrase));
  const events = [...actionPaths.httpApproved('act_audit_cli_0001'), ...actionPaths.httpApproved('act_audit_cli_0002')];
  for (const event of events.slice(0, unlocked)) await journal.append(event);
  vault.lock('operator');
  for (const event of events.slice(unlocked, unlocked + locked)) await journal.append(event);
  await journal.close();
  await vault.close();
  return dataDir;
}

/**
 * Each file in `dir` but SQLite's WAL index and log (`-shm`, `-wal`: a reader of a WAL database may create them; they
 * hold no content of their own until something is written), with its bytes' hash, size, mode and times.
 */
function databaseFiles(dir: string) {
  return readdirSync(dir)
    .filter((name) => !name.endsWith('-shm') && !name.endsWith('-wal'))
    .sort()
    .map((name) => {
      const stat = statSync(path.join(dir, name));
      const sha256 = createHash('sha256')
        .update(readFileSync(path.join(dir, name)))
        .digest('hex');
      return { name, sha256, size: stat.size, mode: stat.mode, mtimeMs: stat.mtimeMs, ctimeMs: stat.ctimeMs };
    });
}

/** The bytes in every `-wal` file in `dir`: 0 when nothing was written. */
function walBytes(dir: string): number {
  return readdirSync(dir)
    .filter((name) => name.endsWith('-wal'))
    .reduce((sum, name) => sum + statSync(path.join(dir, name)).size, 0);
}

describe('postern audit, end to end', () => {
  it('verifies, exports a fresh checkpoint (signing the events written while locked), exports events, and catches a truncation', async () => {
    const dataDir = await dataDirWithEvents(5, 3);

    const verified = await run(['audit', 'verify', '--data-dir', dataDir, '--json']);
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout.trim())).toMatchObject({
      ok: true,
      events: 8,
      last_checkpoint_size: 5,
      unsigned_tail: 3,
    });

    const file = path.join(scratch, 'checkpoint.json');
    const exported = await run([
      'audit',
      'checkpoint',
      '--export',
      file,
      '--data-dir',
      dataDir,
      '--passphrase-file',
      passphraseFile,
    ]);
    expect(exported.stderr).toBe('');
    expect(exported.code).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ format: 'postern-audit-checkpoint/1', size: 8 });

    const anchored = await run(['audit', 'verify', '--data-dir', dataDir, '--checkpoint', file]);
    expect(anchored.code).toBe(0);
    expect(anchored.stdout).toContain('OK: 8 events');
    expect(anchored.stdout).toContain("checkpoint key: the --checkpoint file's");
    const withVault = await run([
      'audit',
      'verify',
      '--data-dir',
      dataDir,
      '--check-key',
      '--passphrase-file',
      passphraseFile,
    ]);
    expect(withVault.code).toBe(0);
    expect(withVault.stdout).toContain("checkpoint key: the vault's audit signing key");

    const lines = await run([
      'audit',
      'export',
      '--data-dir',
      dataDir,
      '--passphrase-file',
      passphraseFile,
      '--from',
      '2',
      '--to',
      '7',
    ]);
    expect(lines.code).toBe(0);
    const events = lines.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { seq: number; kind: string; payload: unknown });
    expect(events.map((e) => e.seq)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(events[0]).toMatchObject({ kind: 'PREFLIGHT_VALIDATED', payload: {} });
    expect(lines.stdout).not.toContain(passphrase);

    const db = new Database(path.join(dataDir, 'journal.sqlite'));
    db.exec(`DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq > 6;`);
    db.close();
    const truncated = await run(['audit', 'verify', '--data-dir', dataDir, '--checkpoint', file]);
    expect(truncated.code).toBe(1);
    expect(truncated.stdout).toContain('FAILED TRUNCATED at seq 7');
  }, 90_000);

  it('when a same-user process rewrote history under its own key, export refuses and writes no file', async () => {
    const dataDir = await dataDirWithEvents(12, 0);
    const journalPath = path.join(dataDir, 'journal.sqlite');
    const exportArgs = (file: string) => [
      'audit',
      'checkpoint',
      '--export',
      file,
      '--data-dir',
      dataDir,
      '--passphrase-file',
      passphraseFile,
    ];
    const genuine = path.join(scratch, 'genuine-checkpoint.json');
    expect((await run(exportArgs(genuine))).code).toBe(0);
    const genuineBytes = readFileSync(genuine);

    // The first action's events deleted, the rest renumbered and re-hashed, its own key and checkpoint in their place.
    const swap = await swapKeyAndRewrite(journalPath, 'act_audit_cli_0001');
    const attackerKey = Buffer.from(swap.attackerKey).toString('base64');

    const claimed = await run(['audit', 'verify', '--data-dir', dataDir]);
    expect(claimed.code).toBe(0); // consistent under the key the journal claims, and it says whose key that is
    expect(claimed.stdout).toContain(`OK: ${swap.events} events`);
    expect(claimed.stdout).toContain("checkpoint key: the journal's own (audit_keys)");

    const forged = path.join(scratch, 'forged-checkpoint.json');
    const refused = await run(exportArgs(forged));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('postern: AUDIT_KEY_MISMATCH');
    expect(existsSync(forged)).toBe(false);
    expect(readFileSync(genuine).equals(genuineBytes)).toBe(true);
    expect(genuineBytes.toString('utf8')).not.toContain(attackerKey);

    const checked = await run([
      'audit',
      'verify',
      '--data-dir',
      dataDir,
      '--check-key',
      '--passphrase-file',
      passphraseFile,
    ]);
    expect(checked.code).toBe(1);
    expect(checked.stdout).toContain('FAILED KEY_MISMATCH');
    const anchored = await run(['audit', 'verify', '--data-dir', dataDir, '--checkpoint', genuine]);
    expect(anchored.code).toBe(1);
    expect(anchored.stdout).toContain('FAILED KEY_MISMATCH');
  }, 90_000);

  it('verify --check-key writes nothing under the data directory: right passphrase, wrong one, or no vault at all', async () => {
    const dataDir = await dataDirWithEvents(5, 3);
    const wrongFile = path.join(scratch, 'wrong-passphrase');
    writeFileSync(wrongFile, 'not the passphrase\n', { mode: 0o600 });
    const checkKey = (dir: string, file: string) =>
      run(['audit', 'verify', '--data-dir', dir, '--check-key', '--passphrase-file', file]);
    const before = databaseFiles(dataDir);
    // The full listing: nothing appears beside the journal or the vault (no -wal, no -shm), nothing goes.
    const listing = () => readdirSync(dataDir).sort();
    const listed = listing();
    expect(listed).toEqual(expect.arrayContaining(['journal.sqlite', 'vault.sqlite']));

    expect((await checkKey(dataDir, passphraseFile)).code).toBe(0);
    expect(listing()).toEqual(listed);
    const wrong = await checkKey(dataDir, wrongFile);
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain('postern: VAULT_PASSPHRASE_INVALID');
    expect(listing()).toEqual(listed);
    // No byte, mode or time of either database changed; a wrong passphrase is recorded nowhere.
    expect(databaseFiles(dataDir)).toEqual(before);
    expect(walBytes(dataDir)).toBe(0);

    // A journal without a vault beside it (a copy kept for an investigation): refused, and no vault is made.
    const bare = path.join(scratch, `bare-${Math.random().toString(36).slice(2)}`);
    mkdirSync(bare, { mode: 0o700 });
    copyFileSync(path.join(dataDir, 'journal.sqlite'), path.join(bare, 'journal.sqlite'));
    const none = await checkKey(bare, passphraseFile);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('postern: VAULT_NOT_INITIALIZED');
    expect(databaseFiles(bare).map((f) => f.name)).toEqual(['journal.sqlite']);
  }, 60_000);

  it('plain verify of a copied journal leaves its directory as it was: no -wal or -shm appears beside it', async () => {
    const dataDir = await dataDirWithEvents(5, 3);
    const copy = path.join(scratch, `copy-${Math.random().toString(36).slice(2)}`);
    mkdirSync(copy, { mode: 0o700 });
    copyFileSync(path.join(dataDir, 'journal.sqlite'), path.join(copy, 'journal.sqlite'));
    const before = databaseFiles(copy);

    const verified = await run(['audit', 'verify', '--data-dir', copy]);
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain('OK: 8 events');
    // A small journal is simply answered: no start line, no progress.
    expect(verified.stderr).not.toContain('verify:');
    expect(readdirSync(copy)).toEqual(['journal.sqlite']);
    expect(databaseFiles(copy)).toEqual(before);
  }, 60_000);

  it('says at once on stderr that a long verify started, with the rows it is to check, before its report', async () => {
    const dataDir = path.join(scratch, 'long');
    mkdirSync(dataDir, { mode: 0o700 });
    await writeBulkAuditJournal(path.join(dataDir, 'journal.sqlite'), verifyStartLineRowsMin);

    const verified = await run(['audit', 'verify', '--data-dir', dataDir]);
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain(`OK: ${verifyStartLineRowsMin} events`);
    expect(verified.stderr.split('\n')[0]).toBe(`verify: ${verifyStartLineRowsMin} rows to check`);
  }, 90_000);

  it('fails with a code, not a crash, on random bytes named journal.sqlite', async () => {
    const dataDir = path.join(scratch, 'garbage');
    mkdirSync(dataDir, { mode: 0o700 });
    writeFileSync(
      path.join(dataDir, 'journal.sqlite'),
      Buffer.from(Array.from({ length: 10_000 }, (_, i) => (i * 31 + 7) % 251)),
    );
    const result = await run(['audit', 'verify', '--data-dir', dataDir, '--json']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout.trim())).toMatchObject({ ok: false, code: 'DB_UNREADABLE' });
  });

  it('refuses a --to before --from with a coded usage error', async () => {
    const result = await run([
      'audit',
      'export',
      '--data-dir',
      scratch,
      '--from',
      '5',
      '--to',
      '2',
      '--passphrase-file',
      passphraseFile,
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('postern: INVALID_ARGUMENT --to:');
  });
});
