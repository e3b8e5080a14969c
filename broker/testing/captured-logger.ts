import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

/** A real pino logger (debug level) whose every line is kept, for the secret searches. */
export function createCapturedLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString('utf8'));
        callback();
      },
    }),
  );
  return { logger, lines };
}
