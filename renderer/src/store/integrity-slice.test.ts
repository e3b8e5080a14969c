import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuditVerifyResult, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';
import { integrityProgressPollMs } from './integrity-slice.js';

afterEach(() => {
  vi.useRealTimers();
});

const verified: AuditVerifyResult = {
  ok: true,
  checked_at_ms: 7,
  events: 10,
  root: 'ab',
  checkpoints: 1,
  last_checkpoint_size: 10,
  unsigned_tail: 0,
  key_source: 'vault',
};

describe('when a verify started from this window runs for a while', () => {
  it('re-reads its progress until the verify answers, then stops reading and clears it', async () => {
    vi.useFakeTimers();
    const calls: string[] = [];
    let answer: (reply: Reply<AuditVerifyResult>) => void = () => undefined;
    const api = Object.fromEntries(
      brokerApiMethods.map((m) => [
        m,
        () => {
          calls.push(m);
          if (m === 'audit.verify') return new Promise((resolve) => (answer = resolve));
          if (m === 'audit.last')
            return Promise.resolve({ ok: true, value: { last: null, progress: { checked: 4, total: 10 } } });
          return Promise.reject(new Error(`unexpected ${m}`));
        },
      ]),
    ) as unknown as OperatorApi;
    const store = createAppStore(api);
    const running = store.getState().verifyIntegrity();
    expect(store.getState().integrityView).toMatchObject({ verifying: true, progress: null });

    await vi.advanceTimersByTimeAsync(integrityProgressPollMs);
    expect(calls).toEqual(['audit.verify', 'audit.last']);
    expect(store.getState().integrityView.progress).toEqual({ checked: 4, total: 10 });

    answer({ ok: true, value: verified });
    await running;
    expect(store.getState().integrityView).toMatchObject({ verifying: false, progress: null, last: verified });
    await vi.advanceTimersByTimeAsync(integrityProgressPollMs * 4);
    expect(calls).toEqual(['audit.verify', 'audit.last']);
  });
});
