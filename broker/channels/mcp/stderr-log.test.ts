import { describe, expect, it } from 'vitest';
import { createCapturedLogger } from '../../testing/captured-logger.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { SecretForms } from './secret-forms.js';
import { StderrLog } from './stderr-log.js';

const secret = 'sk-live-4f9a2b7c1d';

function stderrLog(options: { lineBytesMax?: number; linesPerSecond?: number } = {}) {
  const { logger, lines } = createCapturedLogger();
  const clock = new FakeClock();
  const log = new StderrLog({
    server: 'files',
    pid: () => 42,
    forms: new SecretForms([Buffer.from(secret)]),
    logger,
    clock,
    lineBytesMax: options.lineBytesMax ?? 2048,
    linesPerSecond: options.linesPerSecond ?? 100,
  });
  const messages = (): string[] => lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
  return { log, clock, messages, lines };
}

describe('the forms of a secret a child may print', () => {
  const forms = new SecretForms([Buffer.from(secret)]);
  it.each([
    ['raw', secret],
    ['hex', Buffer.from(secret).toString('hex')],
    ['HEX', Buffer.from(secret).toString('hex').toUpperCase()],
    ['base64', Buffer.from(secret).toString('base64')],
    ['base64url', Buffer.from(secret).toString('base64url')],
    ['base64 one byte into a blob', Buffer.from(`x${secret}y`).toString('base64')],
    ['base64 two bytes into a blob', Buffer.from(`xy${secret}`).toString('base64')],
    ['percent-encoded', encodeURIComponent(`${secret}/?`)],
  ])('%s is replaced', (_form, text) => {
    const out = forms.scrub(`token=${text};`);
    expect(out).toContain('[redacted]');
    expect(out).not.toContain(secret);
    expect(Buffer.from(out.replace(/^token=|;$/g, ''), 'base64').toString('latin1')).not.toContain(secret);
  });

  it('text cut at an arbitrary byte loses any start of a secret left at its end', () => {
    for (let k = 1; k < secret.length; k++) {
      expect(forms.dropTrailingStart(`${'a'.repeat(10)}${secret.slice(0, k)}`)).toBe('a'.repeat(10));
    }
    for (let cut = 11; cut < 10 + '[redacted]'.length; cut++) {
      const kept = forms.scrubAndCut(`${'a'.repeat(10)}${secret}zzz`, cut);
      expect(kept.startsWith('a'.repeat(10))).toBe(true);
      expect(kept).not.toContain(secret.slice(0, 2));
    }
  });
});

describe('when a child writes to stderr', () => {
  it('each line is logged once, scrubbed, with the server and pid; a last line without newline at the end', () => {
    const { log, messages, lines } = stderrLog();
    log.push(Buffer.from(`starting\nTOKEN=${secret}\npart`));
    log.push(Buffer.from('ial\nno newline'));
    log.end();
    expect(messages()).toEqual([
      'mcp stderr: starting',
      'mcp stderr: TOKEN=[redacted]',
      'mcp stderr: partial',
      'mcp stderr: no newline',
    ]);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ mcp_server: 'files', pid: 42, level: 30 });
  });

  it('a secret split across two writes is still found (lines are joined before scrubbing)', () => {
    const { log, messages } = stderrLog();
    log.push(Buffer.from(`key ${secret.slice(0, 7)}`));
    log.push(Buffer.from(`${secret.slice(7)} done\n`));
    expect(messages()).toEqual(['mcp stderr: key [redacted] done']);
  });

  it('a line over the bound is cut, marked, and the rest up to its newline dropped — a secret at the cut never shows', () => {
    const { log, messages, lines } = stderrLog({ lineBytesMax: 16 });
    log.push(Buffer.from(`${'b'.repeat(12)}${secret}${'c'.repeat(5000)}\nnext\n`));
    expect(messages()).toEqual([`mcp stderr: ${'b'.repeat(12)}[red`, 'mcp stderr: next']);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ cut: true });
    expect(lines.join('')).not.toContain(secret.slice(0, 4));
  });

  it('more lines than the rate bound in a second: the rest are counted and reported as one line', () => {
    const { log, clock, messages, lines } = stderrLog({ linesPerSecond: 3 });
    log.push(Buffer.from('1\n2\n3\n4\n5\n'));
    expect(messages()).toEqual(['mcp stderr: 1', 'mcp stderr: 2', 'mcp stderr: 3']);
    clock.advance(1_000);
    log.push(Buffer.from('6\n'));
    expect(messages().slice(3)).toEqual(['mcp stderr: lines dropped (rate bound)', 'mcp stderr: 6']);
    expect(JSON.parse(lines[3] ?? '{}')).toMatchObject({ dropped: 2 });
  });
});
