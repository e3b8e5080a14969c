import inspector from 'node:inspector';
import { afterEach, describe, expect, it } from 'vitest';
import {
  inspectorSignalsRefused,
  refuseInspectorSignal,
  refuseOpenInspector,
  startedParked,
  watchForOpenInspector,
} from './inspector-guard.js';

// This test file runs in its own forked process (vitest's forks pool), so the signal and the inspector below
// touch only it. tests/inspector-signal.test.ts performs the attack on a real daemon.
afterEach(() => {
  if (inspector.url() !== undefined) inspector.close();
});

describe('inspector guard', () => {
  it('refuses SIGUSR1: the inspector stays closed and each refusal is counted and told', async () => {
    const told: number[] = [];
    const stop = refuseInspectorSignal((refused) => told.push(refused));
    const before = inspectorSignalsRefused();
    process.kill(process.pid, 'SIGUSR1');
    await waitFor(() => told.length === 1);
    expect(inspectorSignalsRefused()).toBe(before + 1);
    expect(told).toEqual([before + 1]);
    expect(inspector.url()).toBeUndefined();
    stop();
    process.kill(process.pid, 'SIGUSR1');
    await waitFor(() => inspectorSignalsRefused() === before + 2);
    expect(told).toEqual([before + 1]);
    expect(inspector.url()).toBeUndefined();
  });

  it('closes an open inspector and refuses with DEBUGGER_OPEN naming what it refused', () => {
    expect(() => refuseOpenInspector('read a secret')).not.toThrow();
    inspector.open(0, '127.0.0.1', false);
    expect(inspector.url()).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\//);
    expect(() => refuseOpenInspector('read a secret')).toThrow(
      expect.objectContaining({ code: 'DEBUGGER_OPEN', message: expect.stringContaining('refuses to read a secret') }),
    );
    expect(inspector.url()).toBeUndefined();
  });

  it('watches for an inspector that opens later, tells once, and stops looking', async () => {
    const refusals: string[] = [];
    const stop = watchForOpenInspector('keep running', (refusal) => refusals.push(refusal.code), 10);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(refusals).toEqual([]);
    inspector.open(0, '127.0.0.1', false);
    await waitFor(() => refusals.length > 0);
    expect(inspector.url()).toBeUndefined();
    inspector.open(0, '127.0.0.1', false);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(refusals).toEqual(['DEBUGGER_OPEN']);
    stop();
  });
});

async function waitFor(holds: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!holds()) {
    if (Date.now() > deadline) throw new Error('condition not reached within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('startedParked', () => {
  it('is true only when the last inspector option node took is the parked port', () => {
    expect(startedParked(['--inspect-port=192.0.2.1:9229'])).toBe(true);
    expect(startedParked(['--enable-source-maps', '--inspect-port=192.0.2.1:9229', '--no-warnings'])).toBe(true);
    expect(startedParked([])).toBe(false);
    expect(startedParked(['--inspect-port=192.0.2.1:9229', '--inspect-port=127.0.0.1:9229'])).toBe(false);
    expect(startedParked(['--inspect-port=192.0.2.1:9229', '--inspect=127.0.0.1:0'])).toBe(false);
  });
});
