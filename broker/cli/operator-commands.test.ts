import { describe, expect, it } from 'vitest';
import { printable } from './operator-commands.js';

describe('printable: agent-chosen text on an operator terminal', () => {
  it('turns escape sequences, carriage returns and bidi overrides into visible escapes', () => {
    const hostile = 'rm -rf ~/x\r\u001b[2K#12 [lane] $ ls\u202Egnp.exe';
    const shown = printable(hostile);
    expect(shown).toBe('rm -rf ~/x\\u000d\\u001b[2K#12 [lane] $ ls\\u202egnp.exe');
    expect([...shown].some((c) => c.charCodeAt(0) < 0x20 || c === '\u202e')).toBe(false);
  });

  it('leaves ordinary text, including non-ASCII, as it is', () => {
    expect(printable('#7 [doc-7] approved, waiting for #6  POST /docs/7 — ünïcode ✓')).toBe('#7 [doc-7] approved, waiting for #6  POST /docs/7 — ünïcode ✓');
  });
});
