import type { Clock } from './clock.js';

/** The real wall clock. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
};
