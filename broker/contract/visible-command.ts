/**
 * A command as a card shows it: every character the agent sent, with the ones a person could not see made
 * visible. A newline, a carriage return, a tab, a terminal escape, a bidi override, a zero-width or non-ASCII
 * space, a blank-drawn filler would otherwise hide a second command, draw over the first or read backwards; each becomes a marked
 * escape (`\n`, `\x1b`, `\u{202e}`). A newline is also kept as a line break, so a second command starts its
 * own line. A long run of spaces (a tail pushed out of sight) becomes one marked count. Pure.
 */
export type CommandPiece =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'hidden'; readonly text: string; readonly title: string };

/** A run of more spaces than this is shown as its count, not as blank space. */
export const spaceRunShownMax = 16;

/**
 * Control (C0, DEL, C1), format (bidi, zero-width), a lone surrogate, line/paragraph separators, every space but
 * U+0020, the default-ignorable code points a font draws as nothing (the Hangul fillers U+3164 / U+FFA0, variation
 * selectors, U+034F), the braille blank U+2800, private-use and unassigned code points (no font promises a glyph).
 */
const invisible = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Zs}\p{Default_Ignorable_Code_Point}\p{Co}\p{Cn}\u2800]/u;
const named: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function visibleCommand(command: string): CommandPiece[] {
  const pieces: CommandPiece[] = [];
  let text = '';
  const flush = (): void => {
    if (text !== '') pieces.push({ kind: 'text', text });
    text = '';
  };
  for (let i = 0; i < command.length;) {
    const run = spacesAt(command, i);
    if (run > spaceRunShownMax) {
      flush();
      pieces.push({ kind: 'hidden', text: `[${run} spaces]`, title: `${run} spaces` });
      i += run;
      continue;
    }
    const ch = String.fromCodePoint(command.codePointAt(i) ?? 0);
    i += ch.length;
    if (ch === ' ' || !invisible.test(ch)) {
      text += ch;
      continue;
    }
    flush();
    pieces.push({ kind: 'hidden', text: escapeOf(ch), title: `invisible character ${codePointName(ch)}` });
    if (ch === '\n') pieces.push({ kind: 'text', text: '\n' });
  }
  flush();
  return pieces;
}

/** How many U+0020 spaces start at `from`. */
function spacesAt(text: string, from: number): number {
  let end = from;
  while (text.charCodeAt(end) === 0x20) end += 1;
  return end - from;
}

/** `\n`, `\r`, `\t`; `\xHH` up to U+00FF; `\u{HHHH}` beyond. */
function escapeOf(ch: string): string {
  const name = named[ch];
  if (name !== undefined) return name;
  const cp = ch.codePointAt(0) ?? 0;
  return cp <= 0xff ? `\\x${cp.toString(16).padStart(2, '0')}` : `\\u{${cp.toString(16)}}`;
}

function codePointName(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** "6 characters", "4,118 characters on 2 lines": the size a person should expect to read. */
export function commandSize(command: string): string {
  const chars = command.length;
  const lines = command.split('\n').length;
  const charsText = `${chars.toLocaleString('en-US')} character${chars === 1 ? '' : 's'}`;
  return lines > 1 ? `${charsText} on ${lines} lines` : charsText;
}
