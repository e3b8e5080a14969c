import { describe, expect, it } from 'vitest';
import { createQuitGate } from './shutdown-sequence.js';

describe('the will-quit gate', () => {
  it('holds the first quit and starts the shutdown, holds repeats while it runs, then lets the app go', () => {
    const gate = createQuitGate();
    expect(gate.onWillQuit()).toBe('start-shutdown');
    expect(gate.onWillQuit()).toBe('hold');
    expect(gate.onWillQuit()).toBe('hold');
    gate.finished();
    expect(gate.onWillQuit()).toBe('let-quit');
  });
});
