import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { recordBrokerError } from './record-broker-error.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

describe('an executor that throws while the journal is closing (the broker stopping)', () => {
  it("is the shutdown's cut: logged at info, never as an error, and nothing recorded", async () => {
    t = await openTempJournal();
    const [accepted, validated] = actionPaths.httpNoApproval('act_closing_cut_01') as [NewEvent, NewEvent];
    await t.journal.append(accepted);
    await t.journal.append(validated);
    // close() waits for the anchor sink (the shutdown checkpoint's anchor file): the journal is closing meanwhile.
    let settle = (): void => undefined;
    const settling = new Promise<void>((resolve) => (settle = resolve));
    t.journal.onCheckpoint({ signed: () => undefined, settled: () => settling });
    const closed = t.journal.close();
    expect(t.journal.stats().state).toBe('closing');
    const { logger, lines } = createCapturedLogger();
    const state = await recordBrokerError(t.journal, 'act_closing_cut_01', logger);
    expect(state).toBeUndefined();
    const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(logged).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'the broker stopped before this action settled; the next start records it',
      }),
    ]);
    settle();
    await closed;
    expect(t.reader().prepare(`SELECT count(*) AS n FROM events`).get()).toEqual({ n: 2 });
  });
});
