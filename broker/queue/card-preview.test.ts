import { describe, expect, it } from 'vitest';
import {
  bodyPreview,
  bodyPreviewBytesMax,
  boundedPairs,
  cardPairCharsMax,
  cardPairsMax,
  httpCardPreview,
  previewFromTarget,
  sshCardPreview,
} from './card-preview.js';

describe('bodyPreview', () => {
  it('shows a short UTF-8 body whole, and nothing for an empty one', () => {
    expect(bodyPreview(Buffer.from('{"a":"ü"}'))).toBe('{"a":"ü"}');
    expect(bodyPreview(Buffer.alloc(0))).toBeNull();
  });

  it('cuts a long body at the byte bound without splitting a character, and says how long it was', () => {
    const body = Buffer.from(`${'a'.repeat(bodyPreviewBytesMax - 1)}ü${'b'.repeat(100)}`);
    const preview = bodyPreview(body) ?? '';
    expect(preview.startsWith('a'.repeat(bodyPreviewBytesMax - 1))).toBe(true);
    expect(preview).not.toContain('\uFFFD');
    expect(preview.endsWith(`… (${body.length} bytes)`)).toBe(true);
  });

  it('describes binary bytes instead of showing them', () => {
    expect(bodyPreview(Buffer.from([0xff, 0xfe, 0x00, 0x01]))).toBe('4 bytes of binary');
  });
});

describe('previewFromTarget (a card after a restart)', () => {
  it('reads the journaled target and names the configured credential', () => {
    expect(previewFromTarget('route:docs PATCH /documents/7', () => 'docs-token')).toMatchObject({
      target: 'route:docs',
      method: 'PATCH',
      path: '/documents/7',
      credential: 'docs-token',
      body_preview: null,
    });
    expect(previewFromTarget(`host:web exec sha256:${'0'.repeat(64)}`, () => 'deploy-key')).toMatchObject({
      target: 'host:web',
      method: null,
      path: null,
      command: null,
    });
  });
});

describe('query and headers on a card', () => {
  it('an HTTP card carries the query and agent-set headers; an SSH card carries none', () => {
    const http = httpCardPreview(
      { name: 'docs', credential: 'docs-token' },
      {
        method: 'GET',
        path: '/documents/7',
        query: [['action', 'purge']],
        headers: [['x-http-method-override', 'DELETE']],
        body: Buffer.alloc(0),
      },
    );
    expect(http).toMatchObject({ query: [['action', 'purge']], headers: [['x-http-method-override', 'DELETE']] });
    expect(sshCardPreview({ name: 'web', credential: 'k' }, 'ls')).toMatchObject({ query: [], headers: [] });
  });

  it('bounds the number of pairs and each side, and says how many pairs are not shown', () => {
    const many = Array.from({ length: cardPairsMax + 5 }, (_, i): [string, string] => [
      `p${i}`,
      'v'.repeat(cardPairCharsMax + 10),
    ]);
    const shown = boundedPairs(many);
    expect(shown).toHaveLength(cardPairsMax);
    expect(shown.at(-1)).toEqual(['…', '6 more not shown']);
    expect(shown[0]?.[1]).toBe(`${'v'.repeat(cardPairCharsMax)}…`);
    expect(boundedPairs(many.slice(0, cardPairsMax))).toHaveLength(cardPairsMax);
  });
});
