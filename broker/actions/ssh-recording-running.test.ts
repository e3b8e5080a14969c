import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { readActionRecording } from '../host/action-recording.js';
import { MisbehavingSshServer, type SshBehavior } from '../testing/misbehaving-ssh-server.js';
import { openSshActionHarness, sshHostsConfig, type SshActionHarness } from '../testing/ssh-action-harness.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { generateKey } from '../testing/test-sshd.js';

/* A recording read while its command is still in flight: nothing is lost yet. */

let keyDir: TempDir;
let privateKey: Buffer;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(() => {
  keyDir = createTempDir('postern-ssh-keys-');
  privateKey = generateKey(keyDir.path, 'agent', 'recording-running-test-key').privateKey;
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(() => keyDir.remove());

async function harnessWith(behavior: SshBehavior): Promise<{ h: SshActionHarness; s: MisbehavingSshServer }> {
  const h = await openSshActionHarness({ 'lab-key': { privateKey, bindings: ['lab'] } });
  cleanups.push(() => h.dispose());
  const s = await MisbehavingSshServer.start(behavior, { journalPath: h.temp.path });
  cleanups.push(() => s.stop());
  return { h, s };
}

function configFor(s: MisbehavingSshServer) {
  return sshHostsConfig([{ port: s.port, user: 'agent', credential: 'lab-key', hostKey: [s.hostKeyFingerprint] }]);
}

/** Waits (bounded) until the journal holds an event of `kind`: the action got that far. */
async function reached(h: SshActionHarness, kind: JournalEvent['kind']): Promise<string> {
  for (let i = 0; i < 500; i += 1) {
    const event = [...h.temp.journal.events()].find((e) => e.kind === kind);
    if (event !== undefined) return event.action_id ?? '';
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no ${kind} within 5 s`);
}

describe('when the recording of an SSH command still running is read', () => {
  it('it answers RECORDING_IN_PROGRESS, never RECORDING_INCOMPLETE, and reads whole once the command ended', async () => {
    const { h, s } = await harnessWith('silent_after_exec');
    const cancel = new AbortController();
    const run = h.run(configFor(s), { host: 'lab', command: 'deploy --now' }, cancel.signal);
    const actionId = await reached(h, 'REMOTE_RESPONSE_STARTED');
    expect(s.log.map((e) => e.event)).toContain('exec_received');
    // Sent and still awaited: no output is lost yet, so the answer must not say it was.
    expect(() => readActionRecording(h.results, h.temp.journal, { action_id: actionId })).toThrow(
      expect.objectContaining({ code: 'RECORDING_IN_PROGRESS' }),
    );
    // Running for longer than the retention is no reason to purge it.
    expect(h.results.recordings.purgeExpired(h.temp.clock.nowMs() + 120_000, 60_000, 10)).toBe(0);
    cancel.abort();
    const { envelope } = await run;
    expect(envelope.invocation_id).toBe(actionId);
    const read = readActionRecording(h.results, h.temp.journal, { action_id: actionId });
    expect(read.cast).toContain('postern: the session ended before its output did');
  });
});
