import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  appendLeaf,
  decodeFrontier,
  emptyFrontier,
  encodeFrontier,
  frontierRoot,
  frontierRootCount,
  leafHash,
  nodeHash,
  rootOfLeaves,
  type MerkleFrontier,
} from './merkle-tree.js';

const sha256 = (data: Uint8Array): Uint8Array => createHash('sha256').update(data).digest();
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const leaves = (n: number): Uint8Array[] =>
  Array.from({ length: n }, (_, i) => leafHash(sha256, Buffer.from(`leaf ${i}`)));

function grown(n: number): MerkleFrontier {
  return leaves(n).reduce((f, leaf) => appendLeaf(sha256, f, leaf), emptyFrontier);
}

describe('when the tree is empty or tiny (RFC 9162 §2.1.1)', () => {
  it.each([
    ['the empty tree is SHA-256 of nothing', 0, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
  ])('%s', (_when, n, expected) => {
    expect(hex(frontierRoot(sha256, grown(n)))).toBe(expected);
  });

  it('one leaf: the head is H(0x00 || leaf); two leaves: H(0x01 || l0 || l1)', () => {
    expect(hex(leafHash(sha256, Buffer.from('x')))).toBe(hex(sha256(Buffer.from([0x00, 0x78]))));
    const [a, b] = leaves(2) as [Uint8Array, Uint8Array];
    expect(hex(frontierRoot(sha256, grown(1)))).toBe(hex(a));
    expect(hex(frontierRoot(sha256, grown(2)))).toBe(hex(sha256(Buffer.concat([Buffer.from([0x01]), a, b]))));
    expect(hex(nodeHash(sha256, a, b))).toBe(hex(rootOfLeaves(sha256, [a, b])));
  });
});

describe('when leaves are appended one at a time', () => {
  it('the frontier head equals the recursive definition for every size up to 70, with one root per set bit', () => {
    for (let n = 0; n <= 70; n += 1) {
      const frontier = grown(n);
      expect(frontier.roots).toHaveLength(frontierRootCount(n));
      expect(hex(frontierRoot(sha256, frontier))).toBe(hex(rootOfLeaves(sha256, leaves(n))));
    }
  });

  it('round-trips through its stored form and refuses a form of the wrong length', () => {
    const frontier = grown(13);
    expect(decodeFrontier(13, encodeFrontier(frontier))).toEqual({
      size: 13,
      roots: frontier.roots.map((r) => new Uint8Array(r)),
    });
    expect(decodeFrontier(12, encodeFrontier(frontier))).toBeUndefined();
    expect(decodeFrontier(-1, new Uint8Array(0))).toBeUndefined();
  });
});
