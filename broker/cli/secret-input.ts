import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import tty from 'node:tty';
import { CodedError } from '../contract/coded-error.js';
import { hardenProcess } from '../host/harden-process.js';
import { refuseOpenInspector } from '../host/inspector-guard.js';
import { passphraseBytesMax, secretBytesMax } from '../vault/credential-input.js';
import type { Env } from './command-context.js';

/**
 * How secrets reach the CLI: from a file the operator names, from stdin, or typed on the terminal
 * without echo — never from argv, where every other local user could read them in the process
 * list. Every function returns a Buffer the caller zeroes (`buffer.fill(0)`) after use.
 */

/** Read from a passphrase file; a little slack for the trailing newline. */
const passphraseFileBytesMax = passphraseBytesMax + 2;

export interface PassphraseSource {
  /** --passphrase-file */
  file?: string;
  env: Env;
}

/** The path of the passphrase file named by the flag or POSTERN_PASSPHRASE_FILE, or undefined when neither is set. */
export function passphraseFileNamed(source: PassphraseSource): string | undefined {
  return source.file ?? nonEmpty(source.env['POSTERN_PASSPHRASE_FILE']);
}

/** The passphrase file named by the flag or POSTERN_PASSPHRASE_FILE, or undefined when neither is set. */
export function passphraseFromFile(source: PassphraseSource, field = '--passphrase-file'): Buffer | undefined {
  const file = passphraseFileNamed(source);
  if (file === undefined) return undefined;
  return readSmallFile(file, passphraseFileBytesMax, field);
}

/**
 * The passphrase from the file, else typed on the controlling terminal without echo (twice when
 * `confirm`). With neither a file nor a terminal: INVALID_ARGUMENT naming --passphrase-file.
 */
export async function readPassphrase(
  source: PassphraseSource,
  prompt: string,
  options: { confirm?: boolean } = {},
): Promise<Buffer> {
  // This CLI process is about to hold a passphrase: no other process of the user may read its memory or run code in it.
  hardenProcess();
  refuseOpenInspector('read a passphrase');
  const fromFile = passphraseFromFile(source);
  if (fromFile !== undefined) return fromFile;
  const first = await promptHidden(`${prompt}: `, passphraseBytesMax, '--passphrase-file');
  if (options.confirm !== true) return first;
  const second = await promptHidden('Repeat it: ', passphraseBytesMax, '--passphrase-file');
  const same = first.equals(second);
  second.fill(0);
  if (!same) {
    first.fill(0);
    throw new CodedError('INVALID_ARGUMENT', 'the two passphrases differ', { field: '--passphrase-file' });
  }
  return first;
}

/**
 * The secret from stdin (`--from-stdin`), at most 64 KiB. From a pipe or file: read to the end; a
 * single trailing newline is dropped unless `keepNewline` (an SSH key keeps its bytes). From a
 * terminal: typed without echo, one line.
 */
export async function readSecretFromStdin(options: { keepNewline: boolean }): Promise<Buffer> {
  hardenProcess();
  refuseOpenInspector('read a secret');
  if (process.stdin.isTTY) {
    if (options.keepNewline) {
      throw new CodedError('INVALID_ARGUMENT', 'pipe the key file in: --from-stdin < ~/.ssh/id_ed25519', {
        field: '--from-stdin',
      });
    }
    return promptHidden('Secret (input hidden): ', secretBytesMax, '--from-stdin');
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      total += chunk.length;
      if (total > secretBytesMax + 2)
        throw new CodedError('PAYLOAD_LIMIT', `a secret is at most ${secretBytesMax} bytes`, { field: '--from-stdin' });
    }
    const all = Buffer.concat(chunks);
    const secret = options.keepNewline ? copy(all) : copy(withoutTrailingNewline(all));
    all.fill(0);
    return secret;
  } finally {
    for (const chunk of chunks) chunk.fill(0);
  }
}

function readSmallFile(file: string, bytesMax: number, field: string): Buffer {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      { field },
    );
  }
  try {
    const size = fstatSync(fd).size;
    if (size > bytesMax)
      throw new CodedError(
        'PAYLOAD_LIMIT',
        `${file} is larger than ${bytesMax} bytes; it should hold only the passphrase`,
        { field },
      );
    const raw = Buffer.alloc(size);
    const read = readSync(fd, raw, 0, size, 0);
    const passphrase = copy(withoutTrailingNewline(raw.subarray(0, read)));
    raw.fill(0);
    if (passphrase.length === 0) throw new CodedError('INVALID_ARGUMENT', `${file} is empty`, { field });
    return passphrase;
  } finally {
    closeSync(fd);
  }
}

/**
 * A person's proof for an operator decision: the vault passphrase typed on this process's
 * controlling terminal, never a file, an argument or stdin (all of which a same-user agent can
 * fill). A process without a controlling terminal (setsid, a double fork under setsid, nohup
 * without one) cannot open /dev/tty and gets `noTerminal()`.
 */
export async function readProofFromTerminal(prompt: string, noTerminal: () => CodedError): Promise<Buffer> {
  hardenProcess();
  refuseOpenInspector('read a passphrase');
  return promptHidden(prompt, passphraseBytesMax, 'proof', noTerminal);
}

/**
 * Reads one line from the controlling terminal in raw mode, echoing nothing. /dev/tty, not stdin:
 * stdin may be carrying the secret (`--from-stdin`). No terminal (a service, a pipe under setsid):
 * INVALID_ARGUMENT naming `field`, so a script learns to pass a file.
 */
async function promptHidden(
  prompt: string,
  bytesMax: number,
  field: string,
  noTerminal?: () => CodedError,
): Promise<Buffer> {
  let inFd: number;
  let outFd: number;
  try {
    inFd = openSync('/dev/tty', 'r');
    outFd = openSync('/dev/tty', 'w');
  } catch {
    if (noTerminal !== undefined) throw noTerminal();
    throw new CodedError(
      'INVALID_ARGUMENT',
      'no passphrase: pass --passphrase-file FILE or set POSTERN_PASSPHRASE_FILE (there is no terminal to ask on)',
      {
        field,
      },
    );
  }
  const input = new tty.ReadStream(inFd);
  const output = new tty.WriteStream(outFd);
  const typed = Buffer.alloc(bytesMax);
  let length = 0;
  try {
    // Echo off before the prompt appears, so nothing typed in answer to it is ever echoed.
    input.setRawMode(true);
    output.write(prompt);
    await new Promise<void>((resolve, reject) => {
      input.on('data', (chunk: Buffer) => {
        for (const byte of chunk) {
          if (byte === 0x0d || byte === 0x0a || (byte === 0x04 && length === 0)) return resolve();
          if (byte === 0x03) return reject(new CodedError('INVALID_ARGUMENT', 'cancelled', { field }));
          if (byte === 0x7f || byte === 0x08) {
            // Drop the last character: its UTF-8 continuation bytes, then its lead byte.
            while (length > 0 && ((typed[length - 1] ?? 0) & 0xc0) === 0x80) length -= 1;
            if (length > 0) length -= 1;
            continue;
          }
          if (length >= bytesMax)
            return reject(new CodedError('PAYLOAD_LIMIT', `at most ${bytesMax} bytes`, { field }));
          typed[length] = byte;
          length += 1;
        }
        chunk.fill(0);
      });
    });
    return copy(typed.subarray(0, length));
  } finally {
    typed.fill(0);
    input.setRawMode(false);
    output.write('\n');
    input.destroy();
    output.destroy();
  }
}

function withoutTrailingNewline(bytes: Buffer): Buffer {
  if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0a) {
    const end = bytes.length >= 2 && bytes[bytes.length - 2] === 0x0d ? bytes.length - 2 : bytes.length - 1;
    return bytes.subarray(0, end);
  }
  return bytes;
}

/** A copy in its own (unpooled) memory, so zeroing it zeroes nothing else and misses nothing. */
function copy(bytes: Uint8Array): Buffer {
  const out = Buffer.alloc(bytes.length);
  out.set(bytes);
  return out;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
