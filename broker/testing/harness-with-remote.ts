import { afterAll, afterEach, beforeAll } from 'vitest';
import { openHttpActionHarness, type HttpActionHarness } from './http-action-harness.js';
import { abandonBlockedHeads } from './queue-waits.js';

/**
 * A test file's harness and remote, with their life registered as vitest hooks: both opened before the file's tests
 * (and handed to `opened`, which keeps them in the file's own variables), a lane's blocked head abandoned after each
 * test (a recorded unknown outcome blocks its lane, by design, and the next case must not wait behind it), both closed
 * after the last.
 */
export function harnessWithRemote<Remote extends { close(): Promise<void> }>(
  start: () => Promise<Remote>,
  opened: (them: { h: HttpActionHarness; remote: Remote }) => void,
): void {
  let h: HttpActionHarness | undefined;
  let remote: Remote | undefined;
  beforeAll(async () => {
    h = await openHttpActionHarness();
    remote = await start();
    opened({ h, remote });
  });
  afterEach(async () => {
    if (h !== undefined) await abandonBlockedHeads(h.queue);
  });
  afterAll(async () => {
    await remote?.close();
    await h?.dispose();
  });
}
