import { describe, expect, it } from 'vitest';
import { bodyPreview, bodyPreviewBytesMax, previewFromTarget } from './card-preview.js';

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
    expect(previewFromTarget('route:docs PATCH /documents/7', () => 'docs-token')).toMatchObject({ target: 'route:docs', method: 'PATCH', path: '/documents/7', credential: 'docs-token', body_preview: null });
    expect(previewFromTarget(`host:web exec sha256:${'0'.repeat(64)}`, () => 'deploy-key')).toMatchObject({ target: 'host:web', method: null, path: null, command: null });
  });
});
