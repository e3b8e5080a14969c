import { describe, expect, it } from 'vitest';
import { isShortestFormUtf8, normalizeRequestPath } from './normalize-request-path.js';

describe('normalizeRequestPath when a segment is encoded twice or in a non-shortest UTF-8 form', () => {
  it.each([
    // Double encoding: a server that decodes twice would see '.', '/', '\', NUL or '%'.
    ['/a/%252e%252e/b', 'double'],
    ['/a/%252E', 'double'],
    ['/a%252fb', 'double'],
    ['/a%255cb', 'double'],
    ['/a%2500', 'double'],
    ['/a%2541', 'double'],
    // Overlong forms of '.', '/', '\' (what lenient decoders turn into a traversal).
    ['/a/%c0%ae%c0%ae/b', 'UTF-8'],
    ['/a%c0%afb', 'UTF-8'],
    ['/a%C1%9Cb', 'UTF-8'],
    ['/a%e0%80%ae', 'UTF-8'],
    ['/a%f0%80%80%ae', 'UTF-8'],
    ['/a%c0%80', 'UTF-8'],
    // Not UTF-8 at all: a stray continuation, a truncated sequence, surrogates, beyond U+10FFFF, 0xFE/0xFF.
    ['/a%80', 'UTF-8'],
    ['/a%c3', 'UTF-8'],
    ['/a%c3a', 'UTF-8'],
    ['/a%e2%82', 'UTF-8'],
    ['/a%ed%a0%80', 'UTF-8'],
    ['/a%f4%90%80%80', 'UTF-8'],
    ['/a%f5%80%80%80', 'UTF-8'],
    ['/a%fe', 'UTF-8'],
    ['/a%ff', 'UTF-8'],
  ])('when the path is %j it is refused (%s)', (path, why) => {
    const check = normalizeRequestPath(path);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.why).toContain(why);
  });

  it.each([
    '/caf%C3%A9',
    '/%E2%82%AC',
    '/%F0%9F%98%80',
    '/%EF%BF%BD',
    '/%F4%8F%BF%BF',
    '/%ED%9F%BF',
    '/100%25',
    '/a%25zz',
    '/a%25',
    '/a%2B',
    '/a%20b',
  ])('when the path is %j (well-formed, single encoding) it is accepted', (path) => {
    expect(normalizeRequestPath(path)).toEqual({ ok: true, path });
  });
});

describe('isShortestFormUtf8', () => {
  it.each([
    [[], true],
    [[0x41, 0x7f], true],
    [[0xc2, 0x80], true],
    [[0xdf, 0xbf], true],
    [[0xe0, 0xa0, 0x80], true],
    [[0xed, 0x9f, 0xbf], true],
    [[0xee, 0x80, 0x80], true],
    [[0xf0, 0x90, 0x80, 0x80], true],
    [[0xf4, 0x8f, 0xbf, 0xbf], true],
    [[0xc0, 0xae], false],
    [[0xc1, 0xbf], false],
    [[0xe0, 0x9f, 0xbf], false],
    [[0xed, 0xa0, 0x80], false],
    [[0xf0, 0x8f, 0xbf, 0xbf], false],
    [[0xf4, 0x90, 0x80, 0x80], false],
    [[0xf5, 0x80, 0x80, 0x80], false],
    [[0xc2], false],
    [[0xe2, 0x82], false],
    [[0xc2, 0x41], false],
    [[0xbf], false],
  ])('when the bytes are %j it answers %s', (bytes, expected) => {
    expect(isShortestFormUtf8(bytes)).toBe(expected);
  });

  it('agrees with a strict decoder on every 2-byte sequence and every 3- and 4-byte lead with each second byte', () => {
    const strict = new TextDecoder('utf-8', { fatal: true });
    const valid = (bytes: number[]): boolean => {
      try {
        strict.decode(new Uint8Array(bytes));
        return true;
      } catch {
        return false;
      }
    };
    const disagreements: number[][] = [];
    const probe = (bytes: number[]): void => {
      if (isShortestFormUtf8(bytes) !== valid(bytes)) disagreements.push(bytes);
    };
    for (let a = 0; a < 256; a += 1) for (let b = 0; b < 256; b += 1) probe([a, b]);
    for (let a = 0xe0; a < 0x100; a += 1) {
      for (let b = 0; b < 256; b += 1)
        for (const tail of [[0x80], [0xbf], [0x41], [0x80, 0x80], [0xbf, 0xbf]]) probe([a, b, ...tail]);
    }
    expect(disagreements).toEqual([]);
  });
});

describe('normalizeRequestPath when a character must be percent-encoded', () => {
  it.each([
    ['/slow?delay=30000', 'the path has "?": a query goes in the query field (e.g. {"delay": "30000"}), not in path'],
    ['/page#top', 'the path has "#": a fragment is never sent; a literal "#" in a path segment is %23'],
    ['/a b', 'the path has U+0020, which must be percent-encoded as %20'],
    ['/a"b', 'the path has """ (U+0022), which must be percent-encoded as %22'],
    ['/caf\u00e9', 'the path has U+00E9, which must be percent-encoded as %C3%A9'],
    ['/a\u001b[2Kb', 'the path has U+001B, which must be percent-encoded as %1B'],
    ['/x\u{1F600}', 'the path has U+1F600, which must be percent-encoded as %F0%9F%98%80'],
  ])('when the path is %j: names the character and what to do', (path, why) => {
    const check = normalizeRequestPath(path);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.why.startsWith(why)).toBe(true);
  });
});
