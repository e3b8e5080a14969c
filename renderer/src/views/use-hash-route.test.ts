import { describe, expect, it } from 'vitest';
import { watchHash, type HashWindow } from './use-hash-route.js';

/** A window whose hash the test moves, firing hashchange to whoever listens at that moment (as a browser does). */
function hashWindow(hash: string): HashWindow & { navigate(next: string): void; listeners: Set<() => void> } {
  const listeners = new Set<() => void>();
  const location = { hash };
  return {
    location,
    listeners,
    addEventListener: (_type, listener) => listeners.add(listener),
    removeEventListener: (_type, listener) => listeners.delete(listener),
    navigate(next) {
      location.hash = next;
      for (const listener of [...listeners]) listener();
    },
  };
}

describe('the hash route', () => {
  it('hears a navigation that happened after the first render read the hash and before it listened', () => {
    const win = hashWindow('');
    const firstRender = win.location.hash;
    // The page is still mounting: the navigation's hashchange reaches no listener.
    win.navigate('#/activity/events');
    const seen: string[] = [firstRender];
    watchHash(win, (hash) => seen.push(hash));
    expect(seen.at(-1)).toBe('#/activity/events');
  });

  it('follows later navigations and stops at the unsubscribe', () => {
    const win = hashWindow('#/status');
    const seen: string[] = [];
    const stop = watchHash(win, (hash) => seen.push(hash));
    win.navigate('#/sessions');
    stop();
    win.navigate('#/approvals');
    expect(seen).toEqual(['#/status', '#/sessions']);
    expect(win.listeners.size).toBe(0);
  });
});
