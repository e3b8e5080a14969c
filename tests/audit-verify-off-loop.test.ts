import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { writeBulkAuditJournal } from '../broker/testing/bulk-audit-journal.js';
import { threadNiceness } from '../broker/testing/thread-niceness.js';
import { waitFor } from './support/drill.js';
import { startDaemon } from './support/postern-process.js';

/** Long enough that a verify takes a while even on an idle machine (~1 s at 300k events/s on 2 cores). */
const journalEvents = 300_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-verify-loop-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('when the daemon verifies a long journal', () => {
  it('answers a status call sent during the verify before the verify finishes, and shows its progress', async () => {
    const dataDir = path.join(scratch, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    await writeBulkAuditJournal(path.join(dataDir, 'journal.sqlite'), journalEvents);
    const daemon = await startDaemon(dataDir);
    try {
      const settled: string[] = [];
      const verify = callOperator(dataDir, 'audit.verify', {}).then((result) => {
        settled.push('audit.verify');
        return result;
      });
      // The verify has started once audit.last carries its progress (the daemon answered that call mid-verify).
      const running = await waitFor(
        () => callOperator(dataDir, 'audit.last', {}),
        (last) => last.progress !== undefined || settled.length > 0,
        'audit.last to show a running verify',
      );
      // Its worker threads run at a lower CPU priority than the daemon's event loop, which keeps its own.
      const pid = daemon.process.child.pid ?? 0;
      const loopNice = threadNiceness(pid).get(pid) ?? 19;
      const lower = (seen: Map<number, number>): boolean => [...seen.values()].some((nice) => nice > loopNice);
      const threads = await waitFor(
        () => Promise.resolve(threadNiceness(pid)),
        (seen) => settled.length > 0 || lower(seen),
        'a verify worker thread at a lower priority',
      );
      expect(lower(threads)).toBe(true);
      const status = await callOperator(dataDir, 'status', {});
      settled.push('status');
      const result = await verify;

      expect(settled).toEqual(['status', 'audit.verify']);
      expect(status).toBeTypeOf('object');
      expect(loopNice).toBeLessThan(19);
      expect(threads.get(pid)).toBe(loopNice);
      expect(running.progress).toBeDefined();
      expect(running.progress?.checked).toBeLessThanOrEqual(running.progress?.total ?? 0);
      expect(result).toMatchObject({ ok: true, checkpoints: journalEvents / 1_000 });
      if (result.ok) expect(result.events).toBeGreaterThanOrEqual(journalEvents);
      const after = await callOperator(dataDir, 'audit.last', {});
      expect(after).toEqual({ last: result });
    } finally {
      await daemon.process.stop('SIGTERM');
    }
  }, 120_000);
});
