import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { brokerStatusSchema, type NewEvent } from '../contract/index.js';
import type { Journal } from '../journal/journal.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { statusLines, type JournalReport } from './status-text.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

const firstOf = (id: string): NewEvent => actionPaths.httpNoApproval(id)[0] as NewEvent;

/** What a running broker answers for this journal (broker-runtime.ts status, through the contract's schema). */
function brokerReport(journal: Journal): JournalReport {
  const stats = journal.stats();
  return {
    journal: brokerStatusSchema.shape.journal.parse(stats),
    actions: stats.state === 'closed' ? { total: 0, in_flight: 0, unknown: 0 } : journal.actionCounts(),
    read_from: 'broker',
  };
}

function textOf(report: JournalReport): string[] {
  return statusLines({ dataDir: '/data/postern', running: true, impostor: undefined, holder: undefined, report });
}

describe('postern status text', () => {
  it('says a writer thread that failed to start, with its code, detail and time, and that commits run on the loop', async () => {
    const t = await openTempJournal({
      writerThread: 'on-demand',
      threadBatchEventsMin: 1,
      // A native module that does not load: the thread's start fails, as a broken install's would.
      writerThreadNativeBinding: join(tmpdir(), `postern-no-binding-${process.pid}`, 'better_sqlite3.node'),
    });
    opened.push(t);
    const deadline = performance.now() + 20_000;
    for (let i = 0; t.journal.stats().writer_thread.state !== 'failed_to_start' && performance.now() < deadline; i++)
      await t.journal.append(firstOf(`act_statusui_${String(i).padStart(6, '0')}`));
    const report = brokerReport(t.journal);
    expect(report.journal.writer_thread?.state).toBe('failed_to_start');
    const n = report.journal.events;
    expect(textOf(report)).toEqual([
      'Data directory: /data/postern',
      'Broker: running for this data directory',
      `Journal: open in the running broker (${n} events, last seq ${n}, schema v${report.journal.schema_version})`,
      "Writer thread: failed to start (MODULE_NOT_FOUND: Cannot find module '<path>') at 2026-01-01T00:00:00.000Z; commits run on the event loop",
      `Actions: ${n} total, ${n} in flight, 0 unknown`,
    ]);
  });

  it('says nothing of a writer thread that is inline or running: the lines stay as they were', async () => {
    const inline = await openTempJournal({ writerThread: false });
    opened.push(inline);
    await inline.journal.append(firstOf('act_statusui_inline'));
    const running = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    opened.push(running);
    const deadline = performance.now() + 20_000;
    for (let i = 0; running.journal.stats().writer_thread.state !== 'running' && performance.now() < deadline; i++)
      await running.journal.append(firstOf(`act_statusui_run_${String(i).padStart(6, '0')}`));
    for (const [t, state] of [
      [inline, 'inline'],
      [running, 'running'],
    ] as const) {
      const report = brokerReport(t.journal);
      expect(report.journal.writer_thread?.state).toBe(state);
      const lines = textOf(report);
      expect(lines).toHaveLength(4);
      expect(lines[2]).toMatch(/^Journal: open in the running broker \(\d+ events, last seq \d+, schema v\d+\)$/);
      expect(lines.join('\n')).not.toContain('Writer thread');
    }
  });

  it('reads a closing journal as the broker stopping: new actions refused, accepted ones still commit', async () => {
    const t = await openTempJournal();
    opened.push(t);
    await t.journal.append(firstOf('act_statusui_close'));
    // close() awaits the integrity anchor's sink: held open here, the journal stays closing.
    let settle = (): void => undefined;
    const settling = new Promise<void>((resolve) => (settle = resolve));
    t.journal.onCheckpoint({ signed: () => undefined, settled: () => settling });
    const closed = t.journal.close();
    try {
      const report = brokerReport(t.journal);
      expect(report.journal.state).toBe('closing');
      expect(textOf(report)[2]).toBe(
        `Journal: closing in the running broker (stopping: new actions are refused, accepted ones still commit; 1 events, last seq 1, schema v${report.journal.schema_version})`,
      );
    } finally {
      settle();
      await closed;
    }
  });
});
