/**
 * The queue's one timer seam: approval expiry. Production uses the global timers (unref'd, so a
 * pending card never keeps the process alive); tests inject broker/testing/manual-timers.ts and
 * move a FakeClock, so expiry is exercised without sleeping.
 */
export interface QueueTimers {
  set(run: () => void, delayMs: number): QueueTimer;
}

export interface QueueTimer {
  cancel(): void;
}

export const systemQueueTimers: QueueTimers = {
  set(run, delayMs) {
    const handle = setTimeout(run, Math.max(0, delayMs));
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
};
