import type { Logger } from 'pino';
import type { Clock } from '../../ports/index.js';
import type { SecretForms } from './secret-forms.js';

/**
 * The broker's full scrubber (broker/actions/secret-scrubber.ts: decoded views — HTML and JSON escapes, nested
 * encodings — that the exact forms of secret-forms.ts miss), handed in by the composition root: this folder may not
 * import broker/actions.
 */
export interface StderrScrubber {
  /** Bytes past a cut that must be seen so a secret form starting before the cut is found whole. */
  readonly lookaheadBytes: number;
  /** `line` scrubbed and cut at `limitBytes` of its bytes; a form that starts before the cut is redacted whole. */
  scrub(line: Buffer, limitBytes: number): Buffer;
}

export interface StderrLogOptions {
  readonly server: string;
  /** Known once the child is spawned. */
  readonly pid: () => number | undefined;
  readonly forms: SecretForms;
  /** When given, each line goes through it first, on the bytes as written; the exact forms then run as a backstop. */
  readonly scrubber?: StderrScrubber;
  readonly logger: Logger | undefined;
  readonly clock: Clock;
  readonly lineBytesMax: number;
  readonly linesPerSecond: number;
}

/**
 * A child's stderr, line by line, into the broker log at info: every line scrubbed of the server's secrets before
 * it is cut, at most `lineBytesMax` kept of a line and `linesPerSecond` lines logged (the rest counted, then
 * reported as one line). A line longer than the bound is scrubbed with enough kept past the cut that no secret
 * form straddles it unseen; the rest of that line is dropped until its newline.
 */
export class StderrLog {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private discarding = false;
  private windowStartMs = 0;
  private windowLines = 0;
  private dropped = 0;

  constructor(private readonly options: StderrLogOptions) {}

  push(chunk: Buffer): void {
    let rest = chunk;
    for (;;) {
      const newline = rest.indexOf(0x0a);
      if (newline < 0) break;
      this.take(rest.subarray(0, newline));
      this.endLine();
      rest = rest.subarray(newline + 1);
    }
    this.take(rest);
  }

  /** The stream ended: a last line without a newline is logged too. */
  end(): void {
    if (this.pendingBytes > 0) this.endLine();
    this.flushDropped();
  }

  private take(part: Buffer): void {
    if (this.discarding || part.length === 0) return;
    this.pending.push(part);
    this.pendingBytes += part.length;
    const { lineBytesMax, forms, scrubber } = this.options;
    const bound = lineBytesMax + Math.max(forms.longest, scrubber?.lookaheadBytes ?? 0);
    if (this.pendingBytes > bound) {
      this.emit(Buffer.concat(this.pending).subarray(0, bound), true);
      this.reset();
      this.discarding = true;
    }
  }

  private endLine(): void {
    if (!this.discarding) {
      const line = Buffer.concat(this.pending);
      this.emit(line.at(-1) === 0x0d ? line.subarray(0, -1) : line, false);
    }
    this.reset();
    this.discarding = false;
  }

  private reset(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }

  private emit(line: Buffer, cut: boolean): void {
    const { logger, server } = this.options;
    const pid = this.options.pid();
    if (logger === undefined || !this.admit()) return;
    const { text, wasCut } = this.clean(line, cut);
    logger.info({ mcp_server: server, pid, ...(wasCut ? { cut: true } : {}) }, `mcp stderr: ${text}`);
  }

  private clean(line: Buffer, cut: boolean): { text: string; wasCut: boolean } {
    const { forms, lineBytesMax, scrubber } = this.options;
    if (scrubber === undefined) {
      const raw = line.toString('utf8');
      // The raw cut may halve a secret: its start goes before scrubbing, so no shift can bring it into view.
      const text = forms.scrubAndCut(cut ? forms.dropTrailingStart(raw) : raw, lineBytesMax);
      return { text, wasCut: cut || raw.length > lineBytesMax };
    }
    // The full scrubber sees the bytes as written, so its decoded views (an escape, a base64 run) are whole, and it
    // redacts whole any form starting before the cut; the exact forms after it cost little and guard a weaker one.
    const text = forms.scrub(scrubber.scrub(line, lineBytesMax).toString('utf8'));
    return { text, wasCut: cut || line.length > lineBytesMax };
  }

  private admit(): boolean {
    const now = this.options.clock.nowMs();
    if (now - this.windowStartMs >= 1_000) {
      this.flushDropped();
      this.windowStartMs = now;
      this.windowLines = 0;
    }
    if (this.windowLines >= this.options.linesPerSecond) {
      this.dropped += 1;
      return false;
    }
    this.windowLines += 1;
    return true;
  }

  private flushDropped(): void {
    if (this.dropped === 0) return;
    this.options.logger?.info(
      { mcp_server: this.options.server, pid: this.options.pid(), dropped: this.dropped },
      'mcp stderr: lines dropped (rate bound)',
    );
    this.dropped = 0;
  }
}
