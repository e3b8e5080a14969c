import { describe, expect, it } from 'vitest';
import { parseRetryAfterMs } from './parse-retry-after.js';

const now = 784_111_777_000; // Sun, 06 Nov 1994 08:49:37 GMT
describe('parseRetryAfterMs', () => {
  it.each([
    ['delta-seconds', '120', 120_000],
    ['zero', '0', 0],
    ['delta over the bound', '999999', 3_600_000],
    ['an IMF-fixdate 30 s ahead', 'Sun, 06 Nov 1994 08:50:07 GMT', 30_000],
    ['an IMF-fixdate in the past', 'Sun, 06 Nov 1994 08:00:00 GMT', 0],
    ['an IMF-fixdate a year ahead (bounded)', 'Mon, 06 Nov 1995 08:49:37 GMT', 3_600_000],
    ['a negative number', '-5', undefined],
    ['garbage', 'soon', undefined],
    ['an obsolete RFC 850 date', 'Sunday, 06-Nov-94 08:49:37 GMT', undefined],
    ['an impossible time', 'Sun, 06 Nov 1994 25:00:00 GMT', undefined],
    ['absent', undefined, undefined],
  ])('when Retry-After is %s', (_when, value, expected) => {
    expect(parseRetryAfterMs(value, now, 3_600_000)).toBe(expected);
  });
});
