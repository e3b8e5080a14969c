import { describe, expect, it } from 'vitest';
import { actionIdSchema } from '../contract/index.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createRandomIdSource } from './random-id-source.js';

describe('when the random id source mints action ids', () => {
  it('gives act_ plus 26 Crockford base32 characters that the contract accepts', () => {
    const ids = createRandomIdSource(new FakeClock(1_700_000_000_000));
    const id = ids.newActionId();
    expect(id).toMatch(/^act_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(actionIdSchema.safeParse(id).success).toBe(true);
  });

  it('never repeats within one millisecond', () => {
    const ids = createRandomIdSource(new FakeClock(5));
    const seen = new Set(Array.from({ length: 1000 }, () => ids.newActionId()));
    expect(seen.size).toBe(1000);
  });

  it('puts the time first so later ids sort after earlier ones', () => {
    const clock = new FakeClock(1_000);
    const ids = createRandomIdSource(clock);
    const first = ids.newActionId();
    clock.advance(1);
    expect(ids.newActionId().slice(0, 14) > first.slice(0, 14)).toBe(true);
  });

  it('spends every one of the 80 random bits: each character position takes all 32 values', () => {
    const ids = createRandomIdSource(new FakeClock(5));
    const positions = Array.from({ length: 16 }, () => new Set<string>());
    for (let i = 0; i < 2000; i += 1) {
      const random = ids.newActionId().slice(14);
      for (let p = 0; p < 16; p += 1) positions[p]?.add(random.charAt(p));
    }
    expect(positions.map((set) => set.size)).toEqual(Array.from({ length: 16 }, () => 32));
  });
});
