import { describe, expect, it } from 'vitest';
import type { BrokerStatus, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';

const status: BrokerStatus = {
  version: '0.1.0',
  mode: 'desktop',
  started_at_ms: 0,
  data_dir: '/data',
  journal: { state: 'open', events: 1, last_seq: 1, schema_version: 1, recovered_at_open: 0 },
  actions: { total: 0, in_flight: 0, unknown: 0 },
  vault: { state: 'locked', auto_lock_minutes: 15, last_lock: null },
};

/** An API whose replies the test releases by hand, to observe the store in between. */
function controllableApi() {
  const pending: Array<(reply: Reply<BrokerStatus>) => void> = [];
  let calls = 0;
  const api = onlyStatus(() => {
    calls += 1;
    return new Promise((resolve) => pending.push(resolve));
  });
  return { api, pending, calls: () => calls };
}

describe('the status slice', () => {
  it('when refreshed, it is loading until the reply lands, then ready', async () => {
    const { api, pending } = controllableApi();
    const store = createAppStore(api);
    const done = store.getState().refreshStatus();
    expect(store.getState().statusView.phase).toBe('loading');
    pending[0]?.({ ok: true, value: status });
    await done;
    expect(store.getState().statusView).toMatchObject({ phase: 'ready', status });
  });

  it('when a refresh is already in flight, a second one does not call the API again', async () => {
    const { api, pending, calls } = controllableApi();
    const store = createAppStore(api);
    const first = store.getState().refreshStatus();
    await store.getState().refreshStatus();
    expect(calls()).toBe(1);
    pending[0]?.({ ok: true, value: status });
    await first;
  });

  it('when the bridge rejects instead of replying, it shows BROKER_UNREACHABLE', async () => {
    const store = createAppStore(onlyStatus(() => Promise.reject(new Error('ipc gone'))));
    await store.getState().refreshStatus();
    expect(store.getState().statusView).toMatchObject({ phase: 'error', error: { code: 'BROKER_UNREACHABLE' } });
  });
});

/** An api whose status is scripted; every other method rejects (this slice must never call them). */
function onlyStatus(status: OperatorApi['status']): OperatorApi {
  const rest = Object.fromEntries(
    brokerApiMethods.map((m) => [m, () => Promise.reject(new Error(`status slice called ${m}`))]),
  );
  return { ...rest, status } as OperatorApi;
}
