import { describe, expect, it } from 'vitest';
import type { BrokerStatus } from '../../../broker/contract/index.js';
import { initialStatusView, staleStatus, statusReducer, type StatusView } from './status-reducer.js';

const status: BrokerStatus = {
  version: '0.1.0',
  mode: 'headless',
  started_at_ms: 1_700_000_000_000,
  data_dir: '/data',
  journal: { state: 'open', events: 12, last_seq: 12, schema_version: 2, recovered_at_open: 0 },
  actions: { total: 3, in_flight: 1, unknown: 1 },
  vault: { state: 'locked', auto_lock_minutes: 15, last_lock: null },
};
const failure = { ok: false as const, error: { code: 'BROKER_UNREACHABLE', message: 'down' } };
const at = 1_700_000_500_000;

describe('statusReducer', () => {
  it('when a refresh is requested, it is loading and keeps what it had', () => {
    const ready: StatusView = { phase: 'ready', status, error: null, replies: 1, received_at_ms: at };
    expect(statusReducer(ready, { type: 'requested' })).toEqual({ ...ready, phase: 'loading' });
  });

  it('when a status arrives, it is ready, remembers when it came and clears an earlier error', () => {
    const failed: StatusView = { phase: 'error', status: null, error: failure.error, replies: 1, received_at_ms: null };
    expect(statusReducer(failed, { type: 'received', reply: { ok: true, value: status }, at_ms: at })).toEqual({
      phase: 'ready',
      status,
      error: null,
      replies: 2,
      received_at_ms: at,
    });
  });

  it('when a refresh fails after a success, it shows the error and keeps the last status with its own time', () => {
    const ready: StatusView = { phase: 'ready', status, error: null, replies: 1, received_at_ms: at };
    const failed = statusReducer(ready, { type: 'received', reply: failure, at_ms: at + 240_000 });
    expect(failed).toEqual({ phase: 'error', status, error: failure.error, replies: 2, received_at_ms: at });
    // The kept status is a snapshot as of when it came, not as of the failed read: never shown as current.
    expect(staleStatus(failed)).toEqual({ status, asOfMs: at });
  });

  it('a current status is not stale, nor is an error with nothing kept', () => {
    expect(staleStatus({ phase: 'ready', status, error: null, replies: 1, received_at_ms: at })).toBeNull();
    expect(
      staleStatus({ phase: 'error', status: null, error: failure.error, replies: 1, received_at_ms: null }),
    ).toBeNull();
  });

  it('when the first refresh fails, there is an error and no status', () => {
    const next = statusReducer(statusReducer(initialStatusView, { type: 'requested' }), {
      type: 'received',
      reply: failure,
      at_ms: at,
    });
    expect(next).toEqual({ phase: 'error', status: null, error: failure.error, replies: 1, received_at_ms: null });
  });

  it('never mutates the view it was given', () => {
    const before: StatusView = Object.freeze({ ...initialStatusView });
    statusReducer(before, { type: 'requested' });
    statusReducer(before, { type: 'received', reply: { ok: true, value: status }, at_ms: at });
    expect(before).toEqual(initialStatusView);
  });
});
