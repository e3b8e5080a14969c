import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { readActionRecording } from '../host/action-recording.js';
import { journalReached, misbehavingHarnesses, misbehavingHostConfig } from '../testing/ssh-action-harness.js';
import type { RecordingInput } from './ssh-recording.js';

/*
 * A recording while its command is still in flight, and one whose cast cannot be built. The cast builder is the real
 * one, except that while `castBuilder.fails` is set it throws (a fault in building the cast, which no input the channel
 * delivers provokes today): what the executor must survive without leaving the store believing the command runs.
 */
const castBuilder = vi.hoisted(() => ({ fails: false }));
vi.mock('./ssh-recording.js', async (importOriginal) => {
  const real = await importOriginal<{ buildCast: (input: RecordingInput) => Buffer }>();
  return {
    ...real,
    buildCast(input: RecordingInput): Buffer {
      if (castBuilder.fails) throw new Error('the cast could not be built');
      return real.buildCast(input);
    },
  };
});

const remotes = misbehavingHarnesses('recording-running-test-key');
beforeEach(() => {
  castBuilder.fails = false;
});
afterEach(() => remotes.closeOpened());
afterAll(() => remotes.remove());

describe('when the recording of an SSH command still running is read', () => {
  it('it answers RECORDING_IN_PROGRESS, never RECORDING_INCOMPLETE, and reads whole once the command ended', async () => {
    const { h, s } = await remotes.open('silent_after_exec');
    const cancel = new AbortController();
    const run = h.run(misbehavingHostConfig(s), { host: 'lab', command: 'deploy --now' }, cancel.signal);
    const actionId = await journalReached(h, 'REMOTE_RESPONSE_STARTED');
    expect(s.log.map((e) => e.event)).toContain('exec_received');
    // Sent and still awaited: no output is lost yet, so the answer must not say it was.
    expect(() => readActionRecording(h.results, h.temp.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RECORDING_IN_PROGRESS' }),
    );
    // Running for longer than the retention is no reason to purge it.
    expect(await h.results.recordings.purgeExpired(h.temp.clock.nowMs() + 120_000, 60_000, 10)).toBe(0);
    cancel.abort();
    const { envelope } = await run;
    expect(envelope.invocation_id).toBe(actionId);
    const read = readActionRecording(h.results, h.temp.journal, { action_id: actionId });
    expect(read.cast).toContain('postern: the session ended before its output did');
  });
});

describe('when the cast of a finished SSH command cannot be built', () => {
  it('the result is still recorded, and the recording is a leftover (RECORDING_INCOMPLETE) the purge takes', async () => {
    const { h, s } = await remotes.open('exit_0');
    castBuilder.fails = true;
    const { envelope } = await h.run(misbehavingHostConfig(s), { host: 'lab', command: 'deploy --now' });
    expect(envelope.effect).toBe('succeeded');
    const actionId = envelope.invocation_id;
    expect(h.logLines.some((l) => l.includes('ssh recording could not be finished'))).toBe(true);
    // The store no longer holds it as running: not "in progress" for the rest of the run, and purged in its time.
    expect(() => readActionRecording(h.results, h.temp.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RECORDING_INCOMPLETE' }),
    );
    const retentionMs = 60_000;
    expect(await h.results.recordings.purgeExpired(h.temp.clock.nowMs() + retentionMs, retentionMs, 10)).toBe(1);
    expect(() => readActionRecording(h.results, h.temp.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RESULT_EXPIRED' }),
    );
  });
});
