import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import type { BrokerStatus, Reply } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from '../store/app-store.js';
import { refusingApi, renderView, textOf } from './render-test-support.js';
import { StatusPanel } from './status-panel.js';

/** A status as the broker answers it (broker-runtime.ts). */
function statusWith(journal: Partial<BrokerStatus['journal']>): BrokerStatus {
  return {
    version: '0.1.0',
    mode: 'headless',
    started_at_ms: 1_767_225_600_000,
    data_dir: '/data/postern',
    journal: { state: 'open', events: 7, last_seq: 7, schema_version: 22, recovered_at_open: 0, ...journal },
    actions: { total: 2, in_flight: 1, unknown: 0 },
    vault: { state: 'unlocked', auto_lock_minutes: 15, last_lock: null },
  };
}

const failedToStart = {
  state: 'failed_to_start',
  error: { code: 'MODULE_NOT_FOUND', detail: "Cannot find module '<path>'", at_ms: 1_767_225_660_000 },
} as const;

/** The panel as a person reads it after the store read `replies` from the broker in turn (status). */
async function rendered(...replies: Array<Reply<BrokerStatus>>): Promise<{ html: string; text: string }> {
  const api: OperatorApi = { ...refusingApi(), status: () => Promise.resolve(replies.shift() as Reply<BrokerStatus>) };
  const store = createAppStore(api);
  while (replies.length > 0) await store.getState().refreshStatus();
  // A server render reads a zustand store's initial state: this one's is the state after the reads.
  const html = renderView(createElement(StatusPanel), { ...store, getInitialState: store.getState });
  return { html, text: textOf(html) };
}

/** The badge element of the journal's state. */
function journalBadge(html: string): string {
  return /<span class="[^"]*" data-testid="status-journal-state"[^>]*>[^<]*<\/span>/.exec(html)?.[0] ?? '';
}

describe('the status panel', () => {
  it('shows a closing journal as the broker stopping, in its own passing style: not an error, not unknown', async () => {
    const { html, text } = await rendered({ ok: true, value: statusWith({ state: 'closing' }) });
    expect(journalBadge(html)).toBe(
      '<span class="badge journal-closing" data-testid="status-journal-state">closing</span>',
    );
    expect(text).toContain(
      'closing 7 events, last seq 7, schema v22 · the broker is stopping: new actions are refused, accepted ones still commit',
    );
    expect(html).not.toContain('role="alert"');
    // Its colours: tests/status-panel-style.test.ts.
  });

  it('shows a writer thread that failed to start as a warning line with its code and detail', async () => {
    const { html, text } = await rendered({ ok: true, value: statusWith({ writer_thread: failedToStart }) });
    expect(html).toContain('<div class="status-warning" role="status" data-testid="status-journal-writer-thread">');
    expect(html).toContain('<code data-testid="status-journal-writer-thread-code">MODULE_NOT_FOUND</code>');
    expect(text).toMatch(
      /schema v22 \| Writer thread failed to start \(MODULE_NOT_FOUND: Cannot find module '<path>'\) at \d\d:\d\d:\d\d \S+; commits run on the event loop \(slower under load, nothing lost\) \| Actions/,
    );
    expect(journalBadge(html)).toContain('journal-open');
  });

  it('says nothing of a writer thread inline, starting or running, nor of a failed start in a stale snapshot', async () => {
    for (const state of ['inline', 'starting', 'running'] as const) {
      const { html, text } = await rendered({ ok: true, value: statusWith({ writer_thread: { state } }) });
      expect(html).not.toContain('status-journal-writer-thread');
      expect(text).not.toMatch(/writer thread|stopping/i);
    }
    // The last refresh failed: what only a live broker can vouch for is not shown.
    const { html } = await rendered(
      { ok: true, value: statusWith({ state: 'closing', writer_thread: failedToStart }) },
      { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'the broker does not answer' } },
    );
    expect(html).toContain('data-stale="true"');
    expect(html).not.toContain('status-journal-writer-thread');
    expect(html).not.toContain('status-journal-closing');
  });
});
