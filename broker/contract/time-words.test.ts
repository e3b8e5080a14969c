import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clockOnly, clockTime, dateTime, isoTime, zoneName } from './time-words.js';

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

  it('an instant in an agent-facing or terminal text is ISO UTC; a value outside 1970..9999 is named as a number, never thrown', () => {
    expect(isoTime(at)).toBe('2026-12-03T10:56:02.045Z');
    expect(isoTime(0)).toBe('1970-01-01T00:00:00.000Z');
    expect(isoTime(253_402_300_799_999)).toBe('9999-12-31T23:59:59.999Z');
    expect(isoTime(9_000_000_000_000_000)).toBe('epoch ms 9000000000000000');
    expect(isoTime(-1)).toBe('epoch ms -1');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799_999 }), (ms) => {
        expect(isoTime(ms)).toBe(new Date(ms).toISOString());
      }),
    );
  });
});
