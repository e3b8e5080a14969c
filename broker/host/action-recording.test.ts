import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ResultStore } from '../journal/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import { readActionRecording } from './action-recording.js';

/**
 * actions.recording of a recording an earlier run left open after its command was sent, over a real journal file:
 * RECORDING_INCOMPLETE names the action by ticket, digest and journal position. Its message reaches the console's
 * recording player as it reaches the terminal, so it holds no wall time the daemon would have to write in one zone.
 */
describe('actions.recording: RECORDING_INCOMPLETE', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => ({ temp, store } = await openTempResultStore()));
  afterEach(() => temp.dispose());

  it('names where the action was accepted by its seq, never an ISO or other wall time', async () => {
    const appended = await temp.journal.appendBatch(actionPaths.sshExit23('act_lost_rec_001'));
    const earlier = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
    await earlier.recordings.start('act_lost_rec_001', Date.UTC(2026, 11, 3, 17, 28, 33, 825));
    earlier.close();
    let thrown: unknown;
    try {
      readActionRecording(store, temp.journal, { action_id: 'act_lost_rec_001' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'RECORDING_INCOMPLETE' });
    const message = (thrown as Error).message;
    expect(message).toContain(`accepted at seq ${appended[0]?.event.seq}`);
    expect(message).toContain('host:');
    expect(message).not.toMatch(/\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d/);
  });
});
