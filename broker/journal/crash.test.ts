import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventWaitsForDisk } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { crashActionId, crashVaultKey } from '../testing/crash-ids.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { FakeClock } from '../testing/fake-clock.js';
import { replayJournal } from '../testing/replay-journal.js';
import { readStateTables } from '../testing/state-tables.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { Journal } from './journal.js';

const driverPath = fileURLToPath(new URL('../testing/crash-driver.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const transitions = actionPaths.httpApproved(crashActionId).map((e) => e.kind);
const dispatchAt = transitions.indexOf('DISPATCH_STARTED') + 1;
const committedAt = transitions.indexOf('RESULT_COMMITTED') + 1;

let dir: TempDir;
beforeEach(() => {
  dir = createTempDir('postern-crash-');
});
afterEach(() => dir.remove());

/**
 * Runs the driver in a child process until it reports `cut <k>` (it has made transition k durable
 * and blocks), then SIGKILLs it: no close, no flush, no exit handlers. Waits on the child's own
 * output and exit, never on a timer.
 */
function runUntilCut(
  dbPath: string,
  cut: number,
  mode: 'answered' | 'committed' | 'held' | 'unheard' = 'answered',
): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const args = ['--import', 'tsx', driverPath, dbPath, String(cut), ...(mode === 'answered' ? [] : [mode])];
    const child = spawn(process.execPath, args, {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let stderr = '';
    let killed = false;
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      if (line === `cut ${cut}`) {
        killed = true;
        child.kill('SIGKILL');
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (killed && signal === 'SIGKILL') resolve(lines);
      else reject(new Error(`driver exited (${code ?? signal}) before cut ${cut}: ${stderr}`));
    });
  });
}

describe('when the broker is killed between two durable transitions', () => {
  it.each(transitions.map((kind, i) => [i + 1, kind] as const))(
    'after transition %i (%s) recovery tells the truth about the action',
    async (cut, kind) => {
      const dbPath = join(dir.path, 'journal.sqlite');
      const lines = await runUntilCut(dbPath, cut);
      expect(lines.at(-2)).toMatch(new RegExp(`^appended ${cut} ${kind} ${cut}$`));

      const clock = new FakeClock();
      // The driver's vault: reading the killed run's events needs the audit key it wrapped.
      const vault = await createMemoryVault('unlocked', crashVaultKey);
      const journal = await Journal.open({ path: dbPath, clock, vault });
      const state = journal.getAction(crashActionId);
      const events = [...journal.events()];
      // Every transition the child reported durable survived the kill.
      expect(events.slice(0, cut).map((e) => e.kind)).toEqual(transitions.slice(0, cut));

      if (cut < dispatchAt) {
        expect(state).toMatchObject({
          outcome: 'not_attempted',
          effect: 'no_effect',
          code: 'BROKER_RESTARTED',
          outcome_basis: 'broker_restart_before_dispatch',
          phase: cut === 1 ? 'validation' : 'credential_injection',
          dispatch_seq: null,
        });
        expect(journal.stats().recovered_at_open).toBe(1);
      } else if (cut < committedAt) {
        expect(state).toMatchObject({
          outcome: 'unknown',
          effect: 'unknown_effect',
          code: 'BROKER_RESTARTED',
          outcome_basis: 'broker_restart_after_dispatch',
          phase: 'remote_execution',
          retry: 'reconcile',
          dispatch_seq: dispatchAt,
        });
        expect(journal.stats().recovered_at_open).toBe(1);
      } else {
        expect(state).toMatchObject({ outcome: 'committed', effect: 'succeeded', outcome_basis: 'complete_response' });
        expect(journal.stats().recovered_at_open).toBe(0);
        expect(events.some((e) => e.kind === 'OUTCOME_RECORDED')).toBe(false);
      }
      expect(events).toHaveLength(journal.stats().recovered_at_open === 1 ? cut + 1 : cut);

      // Recovery happens once: a second restart finds nothing left to classify.
      await journal.close();
      const again = await Journal.open({ path: dbPath, clock, vault });
      expect(again.stats().recovered_at_open).toBe(0);
      expect(again.getAction(crashActionId)).toEqual(state);

      // And the recovered record is still a pure replay of its log.
      const replayPath = join(dir.path, 'replay.sqlite');
      const replayClock = new FakeClock();
      const replay = await Journal.open({ path: replayPath, clock: replayClock });
      await replayJournal(again.events(), replay, replayClock);
      expect(readStateTables(replayPath)).toEqual(readStateTables(dbPath));
      await replay.close();
      await again.close();
    },
  );
});

/**
 * The driver killed right after transition `cut` was committed and before its caller was answered (`mode`: the sync
 * held, or the writer thread's ack never sent): nobody was answered, the log holds everything up to it, and recovery
 * classifies the action from what is there.
 */
async function killedCommittedUnanswered(cut: number, kind: string, mode: 'committed' | 'unheard'): Promise<void> {
  const dbPath = join(dir.path, 'journal.sqlite');
  const lines = await runUntilCut(dbPath, cut, mode);
  expect(lines).toContain(`committed ${cut} ${cut}`);
  expect(lines).not.toContain(`answered ${cut}`);

  const vault = await createMemoryVault('unlocked', crashVaultKey);
  const journal = await Journal.open({ path: dbPath, clock: new FakeClock(), vault });
  const events = [...journal.events()];
  // A process kill loses nothing the kernel has (a power cut could lose the unsynced tail, never a middle).
  expect(events.slice(0, cut).map((e) => e.kind)).toEqual(transitions.slice(0, cut));
  expect(kind).toBe(transitions[cut - 1]);
  const state = journal.getAction(crashActionId);
  if (cut < dispatchAt) expect(state).toMatchObject({ outcome: 'not_attempted', code: 'BROKER_RESTARTED' });
  else if (cut < committedAt)
    // DISPATCH_STARTED recorded but never answered: the dispatcher sent nothing, yet the log cannot know that —
    // unknown, never less.
    expect(state).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED', retry: 'reconcile' });
  else expect(state).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
  await journal.close();
}

describe('when the broker is killed between a commit and the sync that would make it durable (sync-behind)', () => {
  // The transitions whose callers wait for the disk: the kill lands after COMMIT, before the fdatasync returns, so the
  // caller (a dispatcher about to send, an executor about to answer) was never told.
  const waiting = transitions.map((kind, i) => [i + 1, kind] as const).filter(([, kind]) => eventWaitsForDisk[kind]);

  it.each(waiting)(
    'at transition %i (%s): nobody was answered, and recovery classifies what the log holds',
    (cut, kind) => killedCommittedUnanswered(cut, kind, 'committed'),
  );
});

describe("when the broker is killed after the writer thread's COMMIT, before the loop hears its ack", () => {
  it.each(transitions.map((kind, i) => [i + 1, kind] as const))(
    'at transition %i (%s): nobody was answered, the log holds the event, and recovery classifies it',
    (cut, kind) => killedCommittedUnanswered(cut, kind, 'unheard'),
  );
});

describe('when the broker is killed with an observation held for the next commit (appendLater)', () => {
  // Transitions that do not wait for the disk, each queued to ride in the next commit; none comes before the kill.
  const held = transitions.map((kind, i) => [i + 1, kind] as const).filter(([, kind]) => !eventWaitsForDisk[kind]);

  it.each(held)(
    'held at transition %i (%s): its caller was never answered, the log ends before it, and recovery says so',
    async (cut, kind) => {
      const dbPath = join(dir.path, 'journal.sqlite');
      const lines = await runUntilCut(dbPath, cut, 'held');
      expect(lines).toContain(`held ${cut}`);
      expect(lines).not.toContain(`answered ${cut}`);

      const vault = await createMemoryVault('unlocked', crashVaultKey);
      const journal = await Journal.open({ path: dbPath, clock: new FakeClock(), vault });
      const events = [...journal.events()];
      const recorded = events.filter((e) => e.action_id === crashActionId).map((e) => e.kind);
      // Everything answered before the held one survived; the held one was never committed.
      expect(recorded.slice(0, cut - 1)).toEqual(transitions.slice(0, cut - 1));
      expect(recorded.slice(cut - 1)).not.toContain(kind);
      const state = journal.getAction(crashActionId);
      if (cut === 1) expect(state).toBeUndefined();
      else if (cut <= dispatchAt)
        expect(state).toMatchObject({ outcome: 'not_attempted', code: 'BROKER_RESTARTED', dispatch_seq: null });
      else if (cut < committedAt)
        expect(state).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED', retry: 'reconcile' });
      else expect(state).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
      await journal.close();
    },
  );
});
