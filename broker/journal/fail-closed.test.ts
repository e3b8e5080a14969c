import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths, sha256Of } from '../testing/action-paths.js';
import type { DiskFullReport } from '../testing/disk-full-driver.js';
import { createTempDir } from '../testing/temp-dir.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

/** A wide acceptance (a 2000-character sanitized target) so a small journal fills in a few dozen. */
function wideAccepted(n: number): NewEvent {
  return {
    kind: 'ACTION_ACCEPTED',
    action_id: `act_full_${String(n).padStart(4, '0')}`,
    payload: {
      channel: 'http',
      target: `route:${'x'.repeat(2000)}`,
      request_fingerprint: sha256Of(n),
      approval: 'none',
      idempotent: false,
    },
  };
}

const wavesMax = 200;

describe('when the disk is full (SQLite refuses to grow the database past the journal size bound)', () => {
  it('fails closed: the failing batch and everything queued behind it reject, nothing after is accepted', async () => {
    // 96 pages: the schema takes 53 (through migration 013's recordings), each wide action ~2, so it fills in the
    // second wave. A real SQLITE_FULL from SQLite's pager, not a mock: PRAGMA max_page_count is the journal's size bound.
    t = await openTempJournal({ journalBytesMax: 96 * 4096, batchEventsMax: 4 });
    const { journal } = t;
    const resolved: string[] = [];
    let failedWave: PromiseSettledResult<unknown>[] | undefined;
    for (let wave = 0; wave < wavesMax && failedWave === undefined; wave += 1) {
      // 12 appends in one turn = 3 transactions of 4: a failing one can have later ones queued.
      const events = Array.from({ length: 12 }, (_, i) => wideAccepted(wave * 12 + i));
      const settled = await Promise.allSettled(events.map((e) => journal.append(e)));
      settled.forEach((s, i) => {
        if (s.status === 'fulfilled') resolved.push(events[i]?.action_id ?? '');
      });
      if (settled.some((s) => s.status === 'rejected')) failedWave = settled;
    }
    if (failedWave === undefined) throw new Error(`the journal never filled within ${wavesMax} waves`);

    // Resolved ones are a prefix of the wave; from the first rejection on, everything is rejected.
    const firstRejected = failedWave.findIndex((s) => s.status === 'rejected');
    expect(failedWave.slice(firstRejected).every((s) => s.status === 'rejected')).toBe(true);
    for (const s of failedWave.slice(firstRejected)) {
      expect(s).toMatchObject({ status: 'rejected', reason: { code: 'JOURNAL_UNAVAILABLE' } });
    }
    const cause = (failedWave[firstRejected] as PromiseRejectedResult).reason as { cause?: { code?: string } };
    expect(cause.cause?.code).toBe('SQLITE_FULL');
    expect(journal.stats().state).toBe('failed');

    // Never retried and continued: a small append would fit, and is still refused.
    await expect(journal.beginDispatch('act_full_0000', 1, { connection: 'fresh' })).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await expect(journal.append(actionPaths.httpNoApproval('act_small_0001')[0] as NewEvent)).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await journal.close();

    // Exactly the resolved appends are in the file: nothing released without being durable,
    // nothing durable that was reported as failed.
    const db = new Database(t.path, { readonly: true });
    const stored = db.prepare(`SELECT action_id FROM events WHERE kind = 'ACTION_ACCEPTED' ORDER BY seq`).all();
    db.close();
    expect(stored.map((r) => (r as { action_id: string }).action_id)).toEqual(resolved);
    expect(resolved.length).toBeGreaterThan(0);

    // With room again the journal opens, and recovery records the accepted actions as not_attempted.
    const reopened = await Journal.open({ path: t.path, clock: t.clock });
    expect(reopened.stats()).toMatchObject({ state: 'open', recovered_at_open: resolved.length });
    expect(reopened.getAction(resolved[0] ?? '')).toMatchObject({
      outcome: 'not_attempted',
      outcome_basis: 'broker_restart_before_dispatch',
    });
    await reopened.close();
  });
});

/**
 * A journal holding one accepted action, with the write lock then taken by a second connection (on this thread: only
 * the test releases it): the action's next event is left for the test to append.
 */
async function lockedByAnother(
  actionId: string,
  busyTimeoutMs: number,
): Promise<{ journal: Journal; validated: NewEvent; other: Database.Database }> {
  t = await openTempJournal({ busyTimeoutMs });
  const [accepted, validated] = actionPaths.httpNoApproval(actionId);
  if (accepted === undefined || validated === undefined) throw new Error('short path');
  await t.journal.append(accepted);
  const other = new Database(t.path);
  other.exec('BEGIN IMMEDIATE');
  return { journal: t.journal, validated, other };
}

describe('when another process holds the write lock past busyTimeoutMs', () => {
  it('fails closed with the SQLite error as the cause, and stays failed after the lock is released', async () => {
    const { journal, validated, other } = await lockedByAnother('act_busy_0001', 20);
    const refused = journal.append(validated);
    await expect(refused).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE', cause: { code: 'SQLITE_BUSY' } });
    other.exec('ROLLBACK');
    other.close();

    expect(journal.stats().state).toBe('failed');
    await expect(journal.append(validated)).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    expect(journal.getAction('act_busy_0001')?.stage).toBe('accepted');
  });
});

describe('when another connection holds the write lock for a moment (the checkpointer’s reset write, a CLI)', () => {
  it('the batch waits queued with the event loop free, and commits once the lock is released', async () => {
    // Long enough that SQLite's busy handler, had it run on the loop, would hold this test's timer for seconds.
    const { journal, validated, other } = await lockedByAnother('act_busy_0002', 3_000);
    const commits = journal.stats().commits;
    const appended = journal.append(validated);
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 30));
    // The timer fired on time: nothing slept on the loop. The event is still queued, nothing committed.
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(journal.stats()).toMatchObject({ state: 'open', pending_events: 1, commits });
    other.exec('COMMIT');
    other.close();

    expect((await appended).state.stage).toBe('validated');
    expect(journal.stats()).toMatchObject({ state: 'open', pending_events: 0, commits: commits + 1 });
  });
});

/** A private mount namespace with its own tmpfs needs Linux and root (CI and this machine have both). */
const canMountTmpfs =
  process.platform === 'linux' && spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']).status === 0;

function runDiskFullDriver(dir: string): Promise<DiskFullReport> {
  const driver = fileURLToPath(new URL('../testing/disk-full-driver.ts', import.meta.url));
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  // 512 KiB: room for the schema (~300 KiB of WAL since migrations 009 and 010) and a dozen wide actions, then ENOSPC while COMMIT writes the WAL.
  const script = 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" --import tsx "$3" "$1"';
  return new Promise((resolve, reject) => {
    const child = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', dir, process.execPath, driver],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(stdout) as DiskFullReport);
      else reject(new Error(`disk-full driver exited ${code}: ${stderr}`));
    });
  });
}

describe('when a real file system runs out of space under the journal', () => {
  it('fails closed on the failed COMMIT: only durable appends resolved, everything after rejected', async (ctx) => {
    if (!canMountTmpfs) ctx.skip('needs Linux and the right to unshare a mount namespace (root) to mount a tiny tmpfs');
    const dir = createTempDir('postern-enospc-');
    try {
      const report = await runDiskFullDriver(dir.path);
      expect(report.resolved.length).toBeGreaterThan(0);
      expect(report.rejectedCodes.length).toBeGreaterThan(0);
      expect(new Set(report.rejectedCodes)).toEqual(new Set(['JOURNAL_UNAVAILABLE']));
      expect(report.causeCode).toMatch(/^SQLITE_(FULL|IOERR)/);
      expect(report.stateAfter).toBe('failed');
      expect(report.laterAppendCode).toBe('JOURNAL_UNAVAILABLE');
      expect(report.stored).toEqual(report.resolved);
    } finally {
      dir.remove();
    }
  });
});
