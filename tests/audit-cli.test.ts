import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { Journal } from '../broker/journal/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { FakeClock } from '../broker/testing/fake-clock.js';
import { openVault } from '../broker/vault/index.js';
import { PosternProcess } from './support/postern-process.js';

/** `postern audit …` as a real subprocess over a journal written by the real journal and vault. */
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
  });

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
