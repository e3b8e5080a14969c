import { useEffect, useMemo } from 'react';
import { playbackSpeeds, shownEvents, type CastEvent, type PlaybackSpeed } from '../store/recording-player.js';
import { useAppStore } from '../store/app-store.js';

/** How often the player's clock moves while playing: smooth enough for people, cheap for the page. */
const tickMs = 50;

/**
 * An SSH action's session recording (asciicast v2), replayed with its timing: play/pause, restart, speed, and a
 * <pre> that appends each piece of output when its time comes. Text only: escape sequences were taken out by the
 * store, and React sets text, never markup, so a remote's output cannot inject anything into the page.
 */
export function RecordingPlayer({ actionId }: { actionId: string }) {
  const view = useAppStore((state) => state.recordingView);
  const load = useAppStore((state) => state.loadRecording);
  const play = useAppStore((state) => state.playRecording);
  const pause = useAppStore((state) => state.pauseRecording);
  const restart = useAppStore((state) => state.restartRecording);
  const setSpeed = useAppStore((state) => state.setRecordingSpeed);
  const tick = useAppStore((state) => state.tickRecording);
  const mine = view.actionId === actionId;
  useEffect(() => {
    void load(actionId);
  }, [load, actionId]);
  useEffect(() => {
    if (!mine || !view.playing) return undefined;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      tick(now - last);
      last = now;
    }, tickMs);
    return () => clearInterval(timer);
  }, [mine, view.playing, tick]);
  const shown = useMemo(
    () => (view.cast === null ? [] : shownEvents(view.cast, view.positionSec)),
    [view.cast, view.positionSec],
  );

  if (!mine || view.phase === 'idle' || view.phase === 'loading') return <p className="muted">loading recording…</p>;
  if (view.phase === 'error' || view.cast === null)
    return (
      <div className="error" role="alert" data-testid="recording-error">
        <strong>{view.error?.code}</strong>
        <span>{view.error?.message}</span>
      </div>
    );
  const cast = view.cast;
  const state = view.playing ? 'playing' : view.positionSec >= cast.durationSec ? 'ended' : 'paused';
  return (
    <div className="recording" data-testid="recording-player" data-state={state}>
      <div className="recording-controls">
        {view.playing ? (
          <button type="button" onClick={pause}>
            Pause
          </button>
        ) : (
          <button type="button" onClick={play}>
            Play
          </button>
        )}
        <button type="button" onClick={restart}>
          Restart
        </button>
        <label>
          Speed{' '}
          <select
            value={view.speed}
            onChange={(e) => setSpeed(Number(e.target.value) as PlaybackSpeed)}
            aria-label="Playback speed"
          >
            {playbackSpeeds.map((s) => (
              <option key={s} value={s}>
                {s}×
              </option>
            ))}
          </select>
        </label>
        <span className="muted" data-testid="recording-position">
          {view.positionSec.toFixed(1)} s / {cast.durationSec.toFixed(1)} s · {cast.events.length} events
          {view.truncated ? ' · output truncated' : ''}
        </span>
      </div>
      <pre className="recording-output" data-testid="recording-output">
        {shown.map((e, i) => (
          <CastPiece key={i} event={e} />
        ))}
      </pre>
    </div>
  );
}

function CastPiece({ event }: { event: CastEvent }) {
  if (event.kind === 'marker')
    return (
      <span className="cast-marker" data-testid="recording-marker">
        {`\n── ${event.text} ──\n`}
      </span>
    );
  return <span className={event.kind === 'stderr' ? 'cast-stderr' : 'cast-stdout'}>{event.text}</span>;
}
