import { describe, expect, it } from 'vitest';
import { commandSize, spaceRunShownMax, visibleCommand, type CommandPiece } from './visible-command.js';

/** The pieces as one string, escapes in ⟦ ⟧, so a case reads as what the card shows. */
const shown = (pieces: CommandPiece[]): string =>
  pieces.map((p) => (p.kind === 'text' ? p.text : `⟦${p.text}⟧`)).join('');

describe('visibleCommand: what the card shows of a command', () => {
  it.each([
    ['uptime', 'uptime'],
    ['systemctl status nginx', 'systemctl status nginx'],
    ["printf 'a\\n'", "printf 'a\\n'"],
    ['uptime\nreboot', 'uptime⟦\\n⟧\nreboot'],
    ['uptime\rreboot', 'uptime⟦\\r⟧reboot'],
    ['a\tb', 'a⟦\\t⟧b'],
    ['ls\u001b[2K\u001b[1Gclear', 'ls⟦\\x1b⟧[2K⟦\\x1b⟧[1Gclear'],
    ['a\u0000b\u007fc\u0085d', 'a⟦\\x00⟧b⟦\\x7f⟧c⟦\\x85⟧d'],
    ['echo \u202egnp.exe', 'echo ⟦\\u{202e}⟧gnp.exe'],
    ['rm\u00a0-rf', 'rm⟦\\xa0⟧-rf'],
    ['a\u200bb\u2028c\ufeff', 'a⟦\\u{200b}⟧b⟦\\u{2028}⟧c⟦\\u{feff}⟧'],
    ['x\ud800y', 'x⟦\\u{d800}⟧y'],
    ['echo ü 😀', 'echo ü 😀'],
    // Letters and symbols a font draws blank: a filler run hides a tail as spaces would.
    ['uptime\u3164\u3164; rm', 'uptime⟦\\u{3164}⟧⟦\\u{3164}⟧; rm'],
    ['a\uffa0b\u115fc\u1160d', 'a⟦\\u{ffa0}⟧b⟦\\u{115f}⟧c⟦\\u{1160}⟧d'],
    ['a\u2800b', 'a⟦\\u{2800}⟧b'],
    ['a\ufe0fb\u034fc', 'a⟦\\u{fe0f}⟧b⟦\\u{34f}⟧c'],
    ['a\ue000b\u0378c', 'a⟦\\u{e000}⟧b⟦\\u{378}⟧c'],
  ])('%j → %j', (command, expected) => {
    expect(shown(visibleCommand(command))).toBe(expected);
  });

  it('keeps a short run of spaces and counts a long one, so a tail is never pushed out of sight', () => {
    const short = ' '.repeat(spaceRunShownMax);
    expect(shown(visibleCommand(`a${short}b`))).toBe(`a${short}b`);
    // Compared piece by piece, long text by its length: a failure stays readable (and quick to diff).
    const brief = visibleCommand(`uptime${' '.repeat(4100)}; rm -rf /srv/data`).map((p) =>
      p.kind === 'hidden' ? `⟦${p.text}⟧` : p.text.length > 40 ? `(${p.text.length} characters of text)` : p.text,
    );
    expect(brief).toEqual(['uptime', '⟦[4100 spaces]⟧', '; rm -rf /srv/data']);
  });

  it('loses no character: every text piece is the command’s own, every escape stands for exactly one character or run', () => {
    const command = `a\nb${' '.repeat(40)}c\u001bd\u202ee`;
    const pieces = visibleCommand(command);
    const restored = pieces
      .map((p) =>
        p.kind === 'text'
          ? p.text
          : p.text.endsWith(' spaces]')
            ? ' '.repeat(Number.parseInt(p.text.slice(1), 10))
            : p.text === '\\n'
              ? ''
              : String.fromCodePoint(Number.parseInt(p.text.replace(/^\\(x|u\{)|\}$/g, ''), 16)),
      )
      .join('');
    expect(restored).toBe(command);
  });
});

describe('commandSize', () => {
  it.each([
    ['x', '1 character'],
    ['uptime', '6 characters'],
    [`uptime${' '.repeat(4100)}; rm -rf /srv/data`, '4,124 characters'],
    ['a\nb\nc', '5 characters on 3 lines'],
  ])('%j → %s', (command, expected) => {
    expect(commandSize(command)).toBe(expected);
  });
});
