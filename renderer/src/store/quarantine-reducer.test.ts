import { describe, expect, it } from 'vitest';
import type { IntegrityAnchorReport } from '../../../broker/contract/index.js';
import { initialQuarantineView, quarantineReducer, quarantineWords } from './quarantine-reducer.js';

const quarantined: IntegrityAnchorReport = {
  state: 'quarantined',
  code: 'ANCHOR_ROLLBACK',
  detail: 'the anchor (counter 4, head 90) is ahead of the journal (60 events): an earlier copy',
  anchor_file: '/home/ann/.local/state/postern/anchors/ab.json',
  found: { counter: 4, head_seq: 90, head_hash: 'ab', key_id: 'cd', written_at_ms: 5 },
  journal: { events: 60, last_seq: 60, recorded_counter: 3, key_id: 'cd' },
  checked_at_ms: 6,
  readopted: null,
};
const adopted: IntegrityAnchorReport = {
  ...quarantined,
  state: 'ok',
  code: null,
  readopted: { by: 'ann', at_ms: 7, code: 'ANCHOR_ROLLBACK' },
};
const locked = { ok: false as const, error: { code: 'VAULT_LOCKED', message: 'unlock the vault' } };

describe('the quarantine banner reducer', () => {
  it('keeps the last report when a read fails, and shows the error', () => {
    const shown = quarantineReducer(initialQuarantineView, {
      type: 'report_received',
      reply: { ok: true, value: quarantined },
    });
    const failed = quarantineReducer(shown, { type: 'report_received', reply: locked });
    expect(failed).toEqual({ report: quarantined, readopting: false, error: locked.error });
  });

  it('a re-adoption refused (vault locked) stays quarantined with the refusal; one accepted replaces the report', () => {
    const started = quarantineReducer(
      { report: quarantined, readopting: false, error: locked.error },
      { type: 'readopt_started' },
    );
    expect(started).toEqual({ report: quarantined, readopting: true, error: null });
    expect(quarantineReducer(started, { type: 'readopt_finished', reply: locked })).toEqual({
      report: quarantined,
      readopting: false,
      error: locked.error,
    });
    expect(quarantineReducer(started, { type: 'readopt_finished', reply: { ok: true, value: adopted } })).toEqual({
      report: adopted,
      readopting: false,
      error: null,
    });
  });

  it('has words for every stable code', () => {
    for (const words of Object.values(quarantineWords)) expect(words.length).toBeGreaterThan(20);
    expect(Object.keys(quarantineWords).sort()).toEqual([
      'ANCHOR_FORGED',
      'ANCHOR_MISSING',
      'ANCHOR_ROLLBACK',
      'ANCHOR_STATE_MISMATCH',
      'ANCHOR_TAIL_MISSING',
    ]);
  });
});
