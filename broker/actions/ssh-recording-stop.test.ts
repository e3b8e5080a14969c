import { afterEach, afterAll, describe, expect, it } from 'vitest';
import { Journal, ResultStore } from '../journal/index.js';
import { readActionRecording } from '../host/action-recording.js';
import {
  journalReached,
  misbehavingHarnesses,
  misbehavingHostConfig,
  type SshActionHarness,
} from '../testing/ssh-action-harness.js';
import { closedNeverSent, rewriteActionRow } from '../testing/action-rows.js';
import { closeUnsentRecordings } from './unsent-recordings.js';

/*
 * The broker stopping (or its result store failing) while an SSH action is in flight: the recording's open row was
 * written, and its seal fails because the store is gone — the runtime closes the result store before the vault, whose
 * lock is what stops a command still being set up. The next start reads the same file.
 */

const remotes = misbehavingHarnesses('recording-stop-test-key');
afterEach(() => remotes.closeOpened());
afterAll(() => remotes.remove());

/** The next start on the same file: the journal reopened (recovery runs) and a result store on it. */
async function restart(
  h: SshActionHarness,
  whileStopped?: () => void,
): Promise<{ journal: Journal; results: ResultStore }> {
  await h.temp.journal.close();
  whileStopped?.();
  const journal = await Journal.open({ path: h.temp.path, clock: h.temp.clock, vault: h.temp.vault });
  const results = ResultStore.open(h.temp.path, journal.rowCipher(), { role: 'broker' });
  remotes.defer(async () => {
    results.close();
    await journal.close();
  });
  return { journal, results };
}

const neverSent = [0, 'm', 'postern: the exec request was never sent'];

function castEvents(cast: string): unknown[] {
  return cast
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l) as unknown);
}

describe('when the broker stops while an SSH command is still being set up, so it is never sent', () => {
  /** The broker stopped before the exec request, and started again on the same file: the recording's row is open. */
  async function stoppedBeforeSend(): Promise<{
    h: SshActionHarness;
    actionId: string;
    next: { journal: Journal; results: ResultStore };
  }> {
    const { h, s } = await remotes.open('stall_auth');
    const run = h.run(misbehavingHostConfig(s), { host: 'lab', command: 'deploy --now' });
    const actionId = await journalReached(h, 'CREDENTIAL_AUTHORIZED');
    // The runtime's close order: the result store, then the vault (its lock stops the setup before dispatch).
    h.results.close();
    await h.vault.close();
    const { envelope } = await run;
    expect(envelope.invocation_id).toBe(actionId);
    expect(envelope.error).toMatchObject({ code: 'VAULT_LOCKED', outcome: 'not_attempted' });
    expect(h.events(actionId).map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
    expect(s.log.map((e) => e.event)).not.toContain('exec_received');
    // The store closed first (the stop), so the recording is left open and said so, never logged as a failure.
    expect(h.logLines.some((l) => l.includes('ssh recording left open: the broker stopped before it was sealed'))).toBe(
      true,
    );
    expect(h.logLines.some((l) => l.includes('ssh recording could not be finished'))).toBe(false);
    return { h, actionId, next: await restart(h) };
  }

  it('its recording reads as never sent, never RECORDING_INCOMPLETE, and the next start seals it so', async () => {
    const { h, actionId, next } = await stoppedBeforeSend();
    // The row is still open: the store alone would answer RECORDING_INCOMPLETE, as if output had been lost.
    expect(() => next.results.recordings.read(actionId)).toThrow(
      expect.objectContaining({ code: 'RECORDING_INCOMPLETE' }),
    );
    // The operator read answers from the journal's proof that nothing was sent: the never-sent mark.
    const read = readActionRecording(next.results, next.journal, { action_id: actionId });
    expect(castEvents(read.cast)).toEqual([neverSent]);
    expect(read).toMatchObject({ truncated: false, bytes: Buffer.byteLength(read.cast) });

    // The start seals it as the executor would have, once: the row is finalized, not left open until forever.
    const deps = { recordings: next.results.recordings, journal: next.journal, clock: h.temp.clock };
    expect(await closeUnsentRecordings(deps)).toBe(1);
    expect(await closeUnsentRecordings(deps)).toBe(0);
    const sealed = next.results.recordings.read(actionId);
    expect(sealed.cast.toString('utf8')).toBe(read.cast);
    expect(JSON.parse(read.cast.split('\n')[0] ?? '')).toMatchObject({
      timestamp: 0,
      title: `postern ${actionId} on lab`,
    });
  });

  it('once past retention it answers RESULT_EXPIRED, as the sealed one would, and the start leaves it', async () => {
    const { h, actionId, next } = await stoppedBeforeSend();
    const retentionMs = 60_000;
    expect(await next.results.purgeExpired(h.temp.clock.nowMs() + retentionMs, retentionMs, 10)).toBe(1);
    // Purged is purged: not the never-sent cast (the purge took the recording, open or sealed), not incomplete.
    expect(() => readActionRecording(next.results, next.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RESULT_EXPIRED' }),
    );
    const deps = { recordings: next.results.recordings, journal: next.journal, clock: h.temp.clock };
    expect(await closeUnsentRecordings(deps)).toBe(0);
  });
});

describe('when the broker stops after the command was sent, while its output is awaited', () => {
  /** The command sent and its output awaited when the broker stops; `whileStopped` runs before the next start. */
  async function stoppedAfterSend(whileStopped?: (h: SshActionHarness, actionId: string) => void): Promise<{
    h: SshActionHarness;
    actionId: string;
    envelope: Awaited<ReturnType<SshActionHarness['run']>>['envelope'];
    next: { journal: Journal; results: ResultStore };
  }> {
    const { h, s } = await remotes.open('silent_after_exec');
    const cancel = new AbortController();
    const run = h.run(misbehavingHostConfig(s), { host: 'lab', command: 'deploy --now' }, cancel.signal);
    const actionId = await journalReached(h, 'REMOTE_RESPONSE_STARTED');
    h.results.close();
    cancel.abort();
    const { envelope } = await run;
    expect(s.log.map((e) => e.event)).toContain('exec_received');
    return { h, actionId, envelope, next: await restart(h, () => whileStopped?.(h, actionId)) };
  }

  it('its recording stays RECORDING_INCOMPLETE (output may be lost), at the read and after the start', async () => {
    const { h, actionId, envelope, next } = await stoppedAfterSend();
    expect(envelope.error).toMatchObject({ outcome: 'unknown' });
    expect(
      await closeUnsentRecordings({ recordings: next.results.recordings, journal: next.journal, clock: h.temp.clock }),
    ).toBe(0);
    expect(() => readActionRecording(next.results, next.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RECORDING_INCOMPLETE' }),
    );
  });

  it('and its row is rewritten to say never sent while no broker runs (THREAT-MODEL): the start does not seal its recording so, as the log holds its DISPATCH_STARTED', async () => {
    const { h, actionId, next } = await stoppedAfterSend((h, id) => rewriteActionRow(h.temp.path, id, closedNeverSent));
    // Its read is its own events' fold (this start has the vault open), not the row: unknown, after a dispatch.
    expect(next.journal.getAction(actionId)).toMatchObject({ outcome: 'unknown', recorded: true });
    expect(next.journal.getAction(actionId)?.dispatch_seq).not.toBeNull();
    expect(
      await closeUnsentRecordings({ recordings: next.results.recordings, journal: next.journal, clock: h.temp.clock }),
    ).toBe(0);
    expect(() => readActionRecording(next.results, next.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RECORDING_INCOMPLETE' }),
    );
  });
});
