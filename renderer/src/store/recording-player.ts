import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

export type RecordingReply = BrokerApi['actions.recording']['output'];

/** One piece of a recording as the player shows it: stdout, stderr, or a marker (the truncation mark). */
export interface CastEvent {
  readonly atSec: number;
  readonly kind: 'stdout' | 'stderr' | 'marker';
  /** Printable text: escape sequences and control bytes already taken out. */
  readonly text: string;
}

export interface ParsedCast {
  readonly events: readonly CastEvent[];
  readonly durationSec: number;
}

/** Playback speeds the player offers. */
export const playbackSpeeds = [1, 2, 4, 8] as const;
export type PlaybackSpeed = (typeof playbackSpeeds)[number];

/** One action's recording as the detail view holds it: what was read, and where playback stands. */
export interface RecordingView {
  actionId: string | null;
  phase: 'idle' | 'loading' | 'ready' | 'error';
  cast: ParsedCast | null;
  truncated: boolean;
  error: ReplyError | null;
  playing: boolean;
  speed: PlaybackSpeed;
  /** Seconds of the recording shown so far. */
  positionSec: number;
}

export type RecordingEvent =
  | { type: 'requested'; actionId: string }
  | { type: 'received'; actionId: string; reply: Reply<RecordingReply> }
  | { type: 'played' }
  | { type: 'paused' }
  | { type: 'restarted' }
  | { type: 'speed_set'; speed: PlaybackSpeed }
  /** Wall time passed while playing; the position moves by it times the speed, never past the end. */
  | { type: 'ticked'; elapsedMs: number };

export const initialRecordingView: RecordingView = {
  actionId: null,
  phase: 'idle',
  cast: null,
  truncated: false,
  error: null,
  playing: false,
  speed: 1,
  positionSec: 0,
};

/** Pure: the next view from one event. A reply for another action is dropped. */
export function recordingReducer(view: RecordingView, event: RecordingEvent): RecordingView {
  switch (event.type) {
    case 'requested':
      return { ...initialRecordingView, actionId: event.actionId, phase: 'loading' };
    case 'received':
      if (event.actionId !== view.actionId) return view;
      return event.reply.ok
        ? { ...view, phase: 'ready', cast: parseCast(event.reply.value.cast), truncated: event.reply.value.truncated }
        : { ...view, phase: 'error', error: event.reply.error };
    case 'played': {
      if (view.cast === null) return view;
      // Play at the end starts over, as a media player does.
      const atEnd = view.positionSec >= view.cast.durationSec;
      return { ...view, playing: true, positionSec: atEnd ? 0 : view.positionSec };
    }
    case 'paused':
      return { ...view, playing: false };
    case 'restarted':
      return { ...view, positionSec: 0 };
    case 'speed_set':
      return { ...view, speed: event.speed };
    case 'ticked': {
      if (!view.playing || view.cast === null) return view;
      const positionSec = Math.min(view.cast.durationSec, view.positionSec + (event.elapsedMs / 1000) * view.speed);
      return { ...view, positionSec, playing: positionSec < view.cast.durationSec };
    }
  }
}

/** The events shown at `positionSec`: every one at or before it, in recorded order. */
export function shownEvents(cast: ParsedCast, positionSec: number): readonly CastEvent[] {
  const end = cast.events.findIndex((e) => e.atSec > positionSec);
  return end === -1 ? cast.events : cast.events.slice(0, end);
}

/**
 * Pure: asciicast v2 text → events. Lines that are not `[seconds, code, string]` and codes the player does not know
 * are skipped (the format lets a recorder add its own); times are held non-decreasing.
 */
export function parseCast(text: string): ParsedCast {
  const events: CastEvent[] = [];
  let last = 0;
  for (const line of text.split('\n').slice(1)) {
    const parsed = parseLine(line);
    if (parsed === undefined) continue;
    last = Math.max(last, parsed.atSec);
    events.push({ ...parsed, atSec: last });
  }
  return { events, durationSec: last };
}

const kinds: Record<string, CastEvent['kind']> = { o: 'stdout', e: 'stderr', m: 'marker' };

function parseLine(line: string): CastEvent | undefined {
  if (line.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 3) return undefined;
  const [atSec, code, data] = value as unknown[];
  const kind = typeof code === 'string' ? kinds[code] : undefined;
  if (typeof atSec !== 'number' || !Number.isFinite(atSec) || atSec < 0 || kind === undefined) return undefined;
  if (typeof data !== 'string') return undefined;
  return { atSec, kind, text: printable(data) };
}

/* CSI (ESC [ … final), OSC (ESC ] … BEL or ESC \), other two-byte escapes, then control bytes but \n and \t (a lone CR too). */
/* eslint-disable no-control-regex -- these patterns exist to find control bytes */
const escapeSequences =
  /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-Z\\-_]?|\u009b[0-?]*[ -/]*[@-~]/g;
const controlBytes = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
/* eslint-enable no-control-regex */

/**
 * What a terminal would print, as plain text: escape sequences (colours, cursor moves, titles) are dropped, not
 * interpreted, and other control bytes too; CR LF becomes LF. The result is shown as text, never as markup.
 */
export function printable(data: string): string {
  return data.replace(/\r\n/g, '\n').replace(escapeSequences, '').replace(controlBytes, '');
}
