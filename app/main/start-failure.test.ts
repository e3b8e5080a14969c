import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dateTime } from '../../broker/contract/time-words.js';
import { lockDataDir, type DataDirLock } from '../../broker/host/index.js';
import { startFailureText } from './start-failure.js';

let dir: string | undefined;
let lock: DataDirLock | undefined;
afterEach(() => {
  lock?.release();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  lock = undefined;
  dir = undefined;
});

/** The error a second broker gets from the real kernel lock while this process holds the data directory. */
function refusedStart(): unknown {
  dir = mkdtempSync(path.join(os.tmpdir(), 'postern-start-failure-'));
  lock = lockDataDir(dir);
  try {
    lockDataDir(dir);
  } catch (error) {
    return error;
  }
  throw new Error('the second lock was not refused');
}

describe("the desktop's start-failure box", () => {
  it("names a running broker's start as every console time (local, the zone named), where the terminal keeps ISO", () => {
    const error = refusedStart();
    expect(error).toMatchObject({ code: 'BROKER_ALREADY_RUNNING' });
    const { started_at_ms: started } = (error as { holder: { started_at_ms: number } }).holder;
    const boxed = startFailureText(error, 'Europe/Berlin');
    expect(boxed).toContain(
      `another Postern broker (pid ${process.pid}, started ${dateTime(started, { zone: 'Europe/Berlin' })})`,
    );
    expect(boxed).toMatch(/started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T\)/);
    expect(boxed).toContain('; stop it first (a stopped or unresponsive broker still runs)');
    expect(boxed).not.toContain(new Date(started).toISOString());
    // The terminal's text (the error's own message) is unchanged: ISO UTC.
    expect((error as Error).message).toContain(`started ${new Date(started).toISOString()})`);
  });

  it('shows any other start failure by its message', () => {
    expect(startFailureText(new Error('the journal is quarantined'))).toBe('the journal is quarantined');
  });
});
