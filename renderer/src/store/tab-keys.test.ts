import { describe, expect, it } from 'vitest';
import { tabKeyTarget } from './tab-keys.js';

describe('tabKeyTarget (WAI-ARIA tabs)', () => {
  it('End moves to the last tab and Home to the first, from anywhere', () => {
    for (const index of [-1, 0, 3, 7]) {
      expect(tabKeyTarget('End', index, 8)).toBe(7);
      expect(tabKeyTarget('Home', index, 8)).toBe(0);
    }
  });

  it('the arrows step and wrap round; other keys are not the tab list’s', () => {
    expect(tabKeyTarget('ArrowRight', 7, 8)).toBe(0);
    expect(tabKeyTarget('ArrowLeft', 0, 8)).toBe(7);
    expect(tabKeyTarget('ArrowRight', 2, 8)).toBe(3);
    expect(tabKeyTarget('ArrowLeft', 2, 8)).toBe(1);
    expect(tabKeyTarget('ArrowRight', -1, 8)).toBe(0);
    expect(tabKeyTarget('Enter', 2, 8)).toBeNull();
    expect(tabKeyTarget('End', -1, 0)).toBeNull();
  });
});
