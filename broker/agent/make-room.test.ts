import { describe, expect, it } from 'vitest';
import { makeRoom, type HeldConnection } from './make-room.js';

/** `process:lastActive`, with a `*` for busy: 'hog:3*'. The key is the connection's index. */
function held(...specs: string[]): HeldConnection<number>[] {
  return specs.map((spec, key) => {
    const [process = '', last = '0'] = spec.replace('*', '').split(':');
    return { key, process, lastActive: Number(last), busy: spec.endsWith('*') };
  });
}

describe('makeRoom', () => {
  it.each([
    ['under the cap', 'new', held('a:1', 'b:2'), 3, { kind: 'admit' }],
    ['at the cap: the least recently active of one process', 'new', held('a:5', 'a:2', 'a:9'), 3, { victim: 1 }],
    [
      'a process holding more loses first, however active it is',
      'victim',
      held('victim:1', 'hog:8', 'hog:9', 'hog:7'),
      4,
      { victim: 3 },
    ],
    [
      "the newcomer's own process counts with the newcomer (it holds the most, so its idle one goes)",
      'hog',
      held('victim:1', 'hog:8', 'hog:9'),
      3,
      { victim: 1 },
    ],
    [
      'a process holding fewer is not pushed out by one holding more',
      'hog',
      held('victim:1', 'hog:8', 'hog:9', 'other:2', 'other:3'),
      5,
      { victim: 1 },
    ],
    ['equal holders: the least recently active', 'new', held('a:4', 'b:2', 'c:3'), 3, { victim: 1 }],
    ['a busy connection is never chosen, even when least active', 'new', held('a:1*', 'a:5'), 2, { victim: 1 }],
    [
      "busy connections of the biggest holder are skipped for another's idle one",
      'new',
      held('hog:1*', 'hog:2*', 'hog:3*', 'v:9'),
      4,
      { victim: 3 },
    ],
    ['every connection busy: refused', 'new', held('a:1*', 'b:2*'), 2, { kind: 'refuse', code: 'RATE_LIMITED' }],
  ])('when %s', (_when, newcomer, connections, connectionsMax, expected) => {
    const decision = makeRoom({ newcomer, held: connections, connectionsMax });
    expect(decision).toMatchObject('victim' in expected ? { kind: 'evict', ...expected } : expected);
  });

  it('says in the refusal that every connection has a call in progress', () => {
    const decision = makeRoom({ newcomer: 'n', held: held('a:1*'), connectionsMax: 1 });
    expect(decision).toEqual({
      kind: 'refuse',
      code: 'RATE_LIMITED',
      message: 'at most 1 agent connections per user, and every one has a call in progress; retry later',
    });
  });
});
