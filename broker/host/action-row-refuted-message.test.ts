import { describe, expect, it } from 'vitest';
import { logHoldsWords } from '../journal/index.js';
import type { ActionRowRefuted } from '../journal/journal.js';
import { actionRowRefutedMessage } from './broker-runtime.js';

const base: ActionRowRefuted = { action_id: 'act_x', row_stage: 'request_sent', log_holds: 'OUTCOME' };

describe("the daemon's warning for a row its log or its own events refute", () => {
  it('says which case it is: found at start, on a read, a held or deferred or laned action whose events do not fold, a retry basis', () => {
    const reports: ActionRowRefuted[] = [
      base,
      { ...base, on_read: true },
      { ...base, log_holds: 'SEALED_EVENTS', events_fold: false },
      { ...base, log_holds: 'SEALED_EVENTS', events_fold: false, deferred: true },
      { ...base, log_holds: 'SEALED_EVENTS', events_fold: false, laned: true },
      { ...base, log_holds: 'RETRY_BASIS' },
    ];
    const messages = reports.map(actionRowRefutedMessage);
    expect(new Set(messages).size).toBe(reports.length);
    expect(messages[0]).toContain(logHoldsWords.OUTCOME);
    expect(messages[3]).toContain('in flight when the broker stopped');
    expect(messages[4]).toContain('laned from its row at start');
    expect(messages[5]).toContain(logHoldsWords.RETRY_BASIS);
    // Ids and names only: the action id is the report's, not the warning's text.
    for (const message of messages) expect(message).not.toContain('act_x');
  });
});
