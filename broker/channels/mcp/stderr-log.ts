import type { Logger } from 'pino';
import type { Clock } from '../../ports/index.js';
import type { SecretForms } from './secret-forms.js';

export interface StderrLogOptions {
  readonly server: string;
  /** Known once the child is spawned. */
  readonly pid: () => number | undefined;
  readonly forms: SecretForms;
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
    const bound = this.options.lineBytesMax + this.options.forms.longest;
    if (this.pendingBytes > bound) {
      // The raw cut may halve a secret: its start goes before scrubbing, so no shift can bring it into view.
      const raw = Buffer.concat(this.pending).subarray(0, bound).toString('utf8');
      this.emit(this.options.forms.dropTrailingStart(raw), true);
      this.reset();
      this.discarding = true;
    }
  }

  private endLine(): void {
    if (!this.discarding) this.emit(Buffer.concat(this.pending).toString('utf8').replace(/\r$/, ''), false);
    this.reset();
    this.discarding = false;
  }

  private reset(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }

  private emit(text: string, cut: boolean): void {
    const { logger, server, forms, lineBytesMax } = this.options;
    const pid = this.options.pid();
    if (logger === undefined || !this.admit()) return;
    const line = forms.scrubAndCut(text, lineBytesMax);
    const wasCut = cut || text.length > lineBytesMax;
    logger.info({ mcp_server: server, pid, ...(wasCut ? { cut: true } : {}) }, `mcp stderr: ${line}`);
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
