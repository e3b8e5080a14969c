/**
 * Child process for the real disk-full test: `node --import tsx broker/testing/disk-full-driver.ts
 * <dir>`, run inside a private mount namespace with a tiny tmpfs mounted on <dir>. Appends wide
 * acceptances in waves until the file system is full (a real ENOSPC under SQLite, typically while
 * COMMIT writes the WAL), then reports on one JSON line what the journal said and what the file
 * holds. The tmpfs vanishes with the namespace, so the driver reads the file back itself.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { isCodedError, type NewEvent } from '../contract/index.js';
import { Journal } from '../journal/journal.js';
import { systemClock } from '../ports/system-clock.js';
import { sha256Of } from './action-paths.js';

export interface DiskFullReport {
  resolved: string[];
  /** Codes of the appends rejected in the failing wave, in request order from the first rejection. */
  rejectedCodes: string[];
  causeCode: string | undefined;
  stateAfter: string;
  laterAppendCode: string | undefined;
  stored: string[];
}

const wavesMax = 2_000;
const waveAppends = 12;

function wideAccepted(n: number): NewEvent {
  return {
    kind: 'ACTION_ACCEPTED',
    action_id: `act_disk_${String(n).padStart(6, '0')}`,
    payload: {
      channel: 'http',
      target: `route:${'y'.repeat(2000)}`,
      request_fingerprint: sha256Of(n),
      approval: 'none',
      idempotent: false,
    },
  };
}

function codeOf(error: unknown): string | undefined {
  if (isCodedError(error)) return error.code;
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

async function main(): Promise<void> {
  const [dir] = process.argv.slice(2);
  if (dir === undefined) throw new Error('usage: disk-full-driver.ts <dir on a small file system>');
  const path = join(dir, 'journal.sqlite');
  const journal = await Journal.open({ path, clock: systemClock, batchEventsMax: 4 });
  const report: DiskFullReport = {
    resolved: [],
    rejectedCodes: [],
    causeCode: undefined,
    stateAfter: '',
    laterAppendCode: undefined,
    stored: [],
  };
  for (let wave = 0; wave < wavesMax && report.rejectedCodes.length === 0; wave += 1) {
    const events = Array.from({ length: waveAppends }, (_, i) => wideAccepted(wave * waveAppends + i));
    const settled = await Promise.allSettled(events.map((e) => journal.append(e)));
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        if (report.rejectedCodes.length === 0) report.resolved.push(events[i]?.action_id ?? '');
        else report.rejectedCodes.push('FULFILLED_AFTER_REJECTION');
      } else {
        report.rejectedCodes.push(codeOf(s.reason) ?? 'UNCODED');
        if (report.causeCode === undefined) report.causeCode = codeOf((s.reason as { cause?: unknown }).cause);
      }
    });
  }
  report.stateAfter = journal.stats().state;
  await journal.beginDispatch('act_disk_000000', 1, { connection: 'fresh' }).catch((error: unknown) => {
    report.laterAppendCode = codeOf(error);
  });
  await journal.close();
  const db = new Database(path, { readonly: true });
  report.stored = db
    .prepare(`SELECT action_id FROM events WHERE kind = 'ACTION_ACCEPTED' ORDER BY seq`)
    .all()
    .map((row) => (row as { action_id: string }).action_id);
  db.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`disk-full-driver failed: ${String(error)}\n`);
  process.exit(2);
});
