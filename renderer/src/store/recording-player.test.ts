import { describe, expect, it } from 'vitest';
import {
  initialRecordingView,
  parseCast,
  printable,
  recordingReducer,
  shownEvents,
  type RecordingView,
} from './recording-player.js';

const cast = [
  JSON.stringify({ version: 2, width: 80, height: 24, timestamp: 1 }),
  JSON.stringify([0.1, 'o', 'one\r\n']),
  JSON.stringify([0.5, 'e', '\u001b[31mtwo\u001b[0m\n']),
  'not json',
  JSON.stringify([0.4, 'x', 'an unknown code is skipped']),
  JSON.stringify([0.3, 'o', 'three']),
  JSON.stringify([0.9, 'm', 'postern: output truncated']),
  '',
].join('\n');

describe('parseCast', () => {
  it('keeps o, e and m events in recorded order, skips what it cannot read, and never lets time go back', () => {
    const parsed = parseCast(cast);
    expect(parsed.events).toEqual([
      { atSec: 0.1, kind: 'stdout', text: 'one\n' },
      { atSec: 0.5, kind: 'stderr', text: 'two\n' },
      { atSec: 0.5, kind: 'stdout', text: 'three' },
      { atSec: 0.9, kind: 'marker', text: 'postern: output truncated' },
    ]);
    expect(parsed.durationSec).toBe(0.9);
  });
});

describe('printable', () => {
  it('drops colour, cursor and title sequences and control bytes, and leaves markup characters as text', () => {
    expect(printable('\u001b]0;title\u0007a\u001b[2J\u001b[1;1Hb\u0000\u0007c\rd\t<img src=x onerror=alert(1)>')).toBe(
      'abcd\t<img src=x onerror=alert(1)>',
    );
  });
});

describe('recordingReducer: playback', () => {
  const ready = (): RecordingView =>
    recordingReducer(recordingReducer(initialRecordingView, { type: 'requested', actionId: 'act_1' }), {
      type: 'received',
      actionId: 'act_1',
      reply: { ok: true, value: { cast, truncated: true, bytes: cast.length } },
    });

  it('moves the position by wall time times the speed, stops at the end, and play at the end starts over', () => {
    let view = recordingReducer(ready(), { type: 'played' });
    view = recordingReducer(view, { type: 'ticked', elapsedMs: 200 });
    expect(view.positionSec).toBeCloseTo(0.2);
    expect(view.cast === null ? [] : shownEvents(view.cast, view.positionSec).map((e) => e.text)).toEqual(['one\n']);
    view = recordingReducer(view, { type: 'speed_set', speed: 4 });
    view = recordingReducer(view, { type: 'ticked', elapsedMs: 1000 });
    expect(view).toMatchObject({ positionSec: 0.9, playing: false, truncated: true });
    view = recordingReducer(view, { type: 'played' });
    expect(view).toMatchObject({ positionSec: 0, playing: true });
  });

  it('a pause stops the clock; a reply for another action is dropped; a refusal is kept as the error', () => {
    const paused = recordingReducer(recordingReducer(ready(), { type: 'played' }), { type: 'paused' });
    expect(recordingReducer(paused, { type: 'ticked', elapsedMs: 500 }).positionSec).toBe(0);
    const loading = recordingReducer(initialRecordingView, { type: 'requested', actionId: 'act_2' });
    const error = { code: 'RECORDING_INCOMPLETE', message: 'never completed' };
    expect(recordingReducer(loading, { type: 'received', actionId: 'act_1', reply: { ok: false, error } })).toBe(
      loading,
    );
    expect(
      recordingReducer(loading, { type: 'received', actionId: 'act_2', reply: { ok: false, error } }),
    ).toMatchObject({ phase: 'error', error });
  });
});
