// Each outcome the summary reporter tells apart, once: see tests/test-summary-reporter.test.ts.
import { describe, expect, it } from 'vitest';

describe('outcomes', () => {
  it('passes', () => {
    expect(1 + 1).toBe(2);
  });
  it('fails on purpose', () => {
    expect({ seq: 41 }, 'the lane head').toEqual({ seq: 42 });
  });
  it('skips with a reason', (ctx) => {
    ctx.skip('the fixture has no sshd');
  });
});
