import { StringDecoder } from 'node:string_decoder';
import type { OutputMark } from '../channels/ssh/index.js';

/** No pty is requested, so the terminal size is nominal: what a player should lay the output out in. */
export const recordingWidth = 80;
export const recordingHeight = 24;

/** What one SSH action's recording is built from: the delivered (scrubbed, capped) output and its arrival marks. */
export interface RecordingInput {
  readonly actionId: string;
  readonly hostName: string;
  /** Wall time the exec request was written (the header's timestamp); undefined: the command never ran. */
  readonly execAtMs: number | undefined;
  /** The channel ended with no report (it threw): whether the exec request was written is not known here. */
  readonly unreported?: boolean;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly marks: readonly OutputMark[];
  /** A stream whose bytes the scrubber changed: its marks no longer line up with its bytes. */
  readonly redacted: { readonly stdout: boolean; readonly stderr: boolean };
  readonly truncated: boolean;
  /**
   * The exec request was sent and the session did not end cleanly (no EOF and channel close, or the connection broke,
   * the deadline or a cancel ended it): output after the last piece may never have arrived.
   */
  readonly outputIncomplete?: boolean;
  /** Bytes received on both streams, beyond the cap too (for the truncation mark's words). */
  readonly receivedBytes: number;
}

type CastEvent = [number, 'o' | 'e' | 'm', string];

/**
 * The asciicast v2 text of one SSH action (docs/ssh-channel.md): a header line, then one `[seconds, code, data]`
 * line per piece of output in arrival order, seconds after the exec request. stdout is `"o"`; stderr is `"e"`, a
 * code of ours (players that know only v2's codes skip it); a cut at the shared output budget is a `"m"` marker.
 * Only delivered bytes are recorded: a stream the scrubber changed is one event at its first piece's time, since
 * its marks no longer line up with its bytes and slicing there could split a redaction. Bytes that are not UTF-8
 * become U+FFFD, as in any terminal recording; a multi-byte character split between pieces is kept whole.
 */
export function buildCast(input: RecordingInput): Buffer {
  const header = {
    version: 2,
    width: recordingWidth,
    height: recordingHeight,
    timestamp: Math.floor((input.execAtMs ?? 0) / 1000),
    title: `postern ${input.actionId} on ${input.hostName}`,
  };
  const lines = [JSON.stringify(header), ...castEvents(input).map((e) => JSON.stringify(e))];
  return Buffer.from(`${lines.join('\n')}\n`, 'utf8');
}

function castEvents(input: RecordingInput): CastEvent[] {
  const events: CastEvent[] = [];
  const streams = {
    stdout: { bytes: input.stdout, at: 0, code: 'o', decoder: new StringDecoder('utf8') },
    stderr: { bytes: input.stderr, at: 0, code: 'e', decoder: new StringDecoder('utf8') },
  } as const satisfies Record<string, unknown>;
  const offsets = { stdout: 0, stderr: 0 };
  let lastSeconds = 0;
  const emit = (stream: 'stdout' | 'stderr', atMs: number, bytes: Buffer): void => {
    const text = streams[stream].decoder.write(bytes);
    lastSeconds = seconds(atMs);
    if (text.length > 0) events.push([lastSeconds, streams[stream].code, text]);
  };
  for (const mark of input.marks) {
    const s = mark.stream;
    const whole = input.redacted[s];
    if (whole && offsets[s] > 0) continue;
    const end = whole ? streams[s].bytes.length : Math.min(streams[s].bytes.length, offsets[s] + mark.bytes);
    emit(s, mark.atMs, streams[s].bytes.subarray(offsets[s], end));
    offsets[s] = end;
  }
  // Whatever the marks did not cover (none, normally) and a character cut at the end still belong in the recording.
  for (const s of ['stdout', 'stderr'] as const) {
    const rest = streams[s].decoder.write(streams[s].bytes.subarray(offsets[s])) + streams[s].decoder.end();
    if (rest.length > 0) events.push([lastSeconds, streams[s].code, rest]);
  }
  if (input.unreported === true)
    events.push([0, 'm', 'postern: the channel gave no report; whether the exec request was sent is not known']);
  else if (input.execAtMs === undefined) events.push([0, 'm', 'postern: the exec request was never sent']);
  if (input.truncated) {
    const kept = input.stdout.length + input.stderr.length;
    const label = `postern: output truncated: ${input.receivedBytes} bytes received, the first ${kept} kept (output_bytes_max)`;
    events.push([lastSeconds, 'm', label]);
  }
  if (input.outputIncomplete === true && input.execAtMs !== undefined)
    events.push([
      lastSeconds,
      'm',
      'postern: the session ended before its output did; output after this may be missing',
    ]);
  return events;
}

/** Seconds with microsecond precision, as asciicast players read them. */
function seconds(ms: number): number {
  return Math.round(ms * 1000) / 1_000_000;
}
