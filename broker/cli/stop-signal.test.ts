import { describe, expect, it } from 'vitest';
import { drainBoundMs } from '../host/shutdown-sequence.js';
import { stopDrainBoundMs } from './stop-signal.js';

describe('how long the headless broker drains when it stops', () => {
  it('SIGINT and SIGTERM drain for the bound; an inspector found open closes at once (no drain with the vault unlocked)', () => {
    expect(stopDrainBoundMs('SIGTERM', drainBoundMs)).toBe(drainBoundMs);
    expect(stopDrainBoundMs('SIGINT', 2_500)).toBe(2_500);
    expect(stopDrainBoundMs('DEBUGGER_OPEN', drainBoundMs)).toBe(0);
  });
});
