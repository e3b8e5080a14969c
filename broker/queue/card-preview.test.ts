import { describe, expect, it } from 'vitest';
import { defaultSshLimits } from '../channels/ssh/ssh-limits.js';
import {
  bodyPreview,
  bodyPreviewBytesMax,
  boundedCommand,
  boundedPairs,
  cardCommandCharsMax,
  cardPairCharsMax,
  cardPairsMax,
  httpCardPreview,
  httpRequestView,
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
    const request = {
      method: 'GET',
      path: '/documents/7',
      query: [['action', 'purge']] as const,
      headers: [['x-http-method-override', 'DELETE']] as const,
      body: Buffer.alloc(0),
    };
    const http = httpCardPreview({ name: 'docs', credential: 'docs-token' }, request, httpRequestView(request));
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
    // The count is the third element only the broker writes, not the pair's text (which an agent can send itself).
    expect(shown.at(-1)).toEqual(['…', '6 more not shown', { pairs_hidden: 6 }]);
    const faked = boundedPairs([['…', '6 more not shown']]);
    expect(faked).toEqual([['…', '6 more not shown']]);
    expect(shown[0]).toEqual(['p0', 'v'.repeat(cardPairCharsMax), { name_hidden: 0, value_hidden: 10 }]);
    expect(boundedPairs(many.slice(0, cardPairsMax))).toHaveLength(cardPairsMax);
  });

  it('when a value is cut: the pair says how many characters are hidden, and nothing is added to the value', () => {
    const [big, fake, whole] = boundedPairs([
      ['big', 'Q'.repeat(2500)],
      // An agent's own "…" at the end of a value that fits: shown as sent, never taken for a cut.
      ['fake', `${'Q'.repeat(100)}…`],
      ['n'.repeat(cardPairCharsMax + 3), 'v'],
    ]);
    expect(big).toEqual([
      'big',
      'Q'.repeat(cardPairCharsMax),
      { name_hidden: 0, value_hidden: 2500 - cardPairCharsMax },
    ]);
    expect(fake).toEqual(['fake', `${'Q'.repeat(100)}…`]);
    expect(whole).toEqual(['n'.repeat(cardPairCharsMax), 'v', { name_hidden: 3, value_hidden: 0 }]);
    // A cut never splits a surrogate pair: the shown part stays valid text.
    const [emoji] = boundedPairs([['e', `${'x'.repeat(cardPairCharsMax - 1)}😀😀`]]);
    expect(emoji).toEqual(['e', 'x'.repeat(cardPairCharsMax - 1), { name_hidden: 0, value_hidden: 4 }]);
  });
});

describe('the command on an SSH card', () => {
  const host = { name: 'web', credential: 'deploy-key' };

  it('is the whole command: a tail pushed past 4096 characters by spaces is on the card', () => {
    const command = `uptime${' '.repeat(4100)}; rm -rf /srv/data`;
    expect(sshCardPreview(host, command).command).toBe(command);
  });

  it('is whole up to the largest command the SSH channel admits (every byte a character)', () => {
    expect(cardCommandCharsMax).toBeGreaterThanOrEqual(defaultSshLimits.commandBytesMax);
    const largest = `${'a'.repeat(defaultSshLimits.commandBytesMax - 8)}; reboot`;
    expect(sshCardPreview(host, largest).command).toBe(largest);
  });

  it('if ever cut, says how many characters are hidden and how long the command is', () => {
    const command = `uptime${' '.repeat(100)}; rm -rf /srv/data`;
    expect(boundedCommand(command, 50)).toBe(`${command.slice(0, 50)}… [74 more characters not shown; 124 in all]`);
    expect(boundedCommand('😀😀', 3)).toBe('😀… [2 more characters not shown; 4 in all]');
    expect(boundedCommand(command, command.length)).toBe(command);
  });
});
