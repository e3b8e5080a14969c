import { describe, expect, it } from 'vitest';
import { clockOnly, clockTime, dateTime, zoneName } from './time-words.js';

const at = Date.UTC(2026, 11, 3, 10, 56, 2, 45);

describe('wall times, one way everywhere', () => {
  it('are 24-hour and always name their zone', () => {
    expect(clockTime(at, { zone: 'UTC' })).toBe('10:56:02 UTC');
    expect(clockTime(at, { zone: 'Europe/Berlin' })).toBe('11:56:02 CET');
    expect(clockTime(Date.UTC(2026, 11, 3, 22, 5, 9), { zone: 'America/New_York' })).toBe('17:05:09 GMT-5');
    expect(dateTime(at, { zone: 'Europe/Berlin' })).toBe('2026-12-03 11:56:02 CET');
  });

  it('a column whose heading names the zone shows the time alone, with milliseconds where asked', () => {
    expect(zoneName(at, { zone: 'Europe/Berlin' })).toBe('CET');
    expect(clockOnly(at, { zone: 'Europe/Berlin', ms: true })).toBe('11:56:02.045');
    expect(clockOnly(at, { zone: 'UTC' })).toBe('10:56:02');
  });
});
