/**
 * Child process for the crash test: `node --import tsx broker/testing/crash-driver.ts <db> <cut> [committed]`.
 * Drives one action through every durable transition of DESIGN.md §2, printing `appended k KIND
 * seq` once transition k is answered (durable, or committed for an event that does not wait for the disk). After
 * transition <cut> it prints `cut <cut>` and blocks, so the parent can SIGKILL it exactly between two transitions.
 * A cut past the last transition closes cleanly and prints `done`.
 *
 * With `committed`, transition <cut> is committed but its fdatasync never runs (sync-behind, held): the driver prints
 * `committed k seq` and `cut k` from the commit notice, before the append answers — the kill lands between a commit
 * and the sync that would have made it durable.
 *
 * With `held`, transition <cut> (one that does not wait for the disk) is queued with appendLater and no commit follows:
 * the driver prints `held k` and `cut k` — the kill lands between a held observation and the next durable commit.
 *
 * With `unheard`, the journal writes on a writer thread, and the batch of transition <cut> commits there and its ack is
 * never sent (JournalOpenOptions.writerAckHeldFromSeq): the driver reads the file until the event is in it, then prints
 * `committed k seq` and `cut k` — the kill lands between the writer's COMMIT and the loop hearing of it.
 *
 * POSTERN_TEST_WRITER_THREAD=1 (the writer-thread pass of `npm test`) runs every mode with every batch on the thread.
 */
import Database from 'better-sqlite3';
import { eventWaitsForDisk } from '../contract/index.js';
import { Journal } from '../journal/journal.js';
import { systemClock } from '../ports/system-clock.js';
import { actionPaths } from './action-paths.js';
import { crashActionId, crashVaultKey } from './crash-ids.js';
import { createMemoryVault } from './memory-vault.js';
import { writerThreadPass } from './temp-journal.js';

/** The parent kills us long before this; the bound only stops an orphan from living forever. */
const blockMsMax = 120_000;

async function main(): Promise<void> {
  const [dbPath, cutArg, mode] = process.argv.slice(2);
  const cut = Number(cutArg);
  if (dbPath === undefined || !Number.isInteger(cut)) throw new Error('usage: crash-driver.ts <db path> <cut point>');
  let holdSyncs = false;
  const unheard = mode === 'unheard';
  const journal = await Journal.open({
    ...(unheard ? { writerThread: true, threadBatchEventsMin: 1, writerAckHeldFromSeq: cut } : writerThreadPass()),
    path: dbPath,
    clock: systemClock,
    vault: await createMemoryVault('unlocked', crashVaultKey),
    beforeSync: () => (holdSyncs ? new Promise<void>(() => undefined) : Promise.resolve()),
    // A held observation is committed only by what comes after it; the kill comes first.
    laterFlushMs: blockMsMax * 2,
  });
  const path = actionPaths.httpApproved(crashActionId);
  for (const [i, event] of path.entries()) {
    const k = i + 1;
    if (k === cut && mode === 'committed') {
      holdSyncs = true;
      journal.onCommit((commit) => {
        process.stdout.write(`committed ${k} ${commit.last_seq}\ncut ${k}\n`);
        setTimeout(() => process.exit(3), blockMsMax);
      });
      void journal.append(event).then(() => process.stdout.write(`answered ${k}\n`));
      return;
    }
    if (k === cut && unheard) {
      void journal.append(event).then(() => process.stdout.write(`answered ${k}\n`));
      const reader = new Database(dbPath, { readonly: true });
      const poll = setInterval(() => {
        if (reader.prepare(`SELECT seq FROM events WHERE seq = ?`).get(k) === undefined) return;
        clearInterval(poll);
        process.stdout.write(`committed ${k} ${k}\ncut ${k}\n`);
      }, 2);
      setTimeout(() => process.exit(3), blockMsMax);
      return;
    }
    if (k === cut && mode === 'held') {
      if (eventWaitsForDisk[event.kind]) throw new Error(`${event.kind} waits for the disk: it is never held`);
      void journal.appendLater(event).then(() => process.stdout.write(`answered ${k}\n`));
      process.stdout.write(`held ${k}\ncut ${k}\n`);
      setTimeout(() => process.exit(3), blockMsMax);
      return;
    }
    // The real dispatcher's call for this boundary; the rest are plain appends.
    const appended =
      event.kind === 'DISPATCH_STARTED'
        ? await journal.beginDispatch(event.action_id, event.payload.attempt, event.payload)
        : await journal.append(event);
    process.stdout.write(`appended ${k} ${appended.event.kind} ${appended.event.seq}\n`);
    if (k === cut) {
      process.stdout.write(`cut ${k}\n`);
      setTimeout(() => process.exit(3), blockMsMax);
      return;
    }
  }
  await journal.close();
  process.stdout.write('done\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`crash-driver failed: ${String(error)}\n`);
  process.exit(2);
});
