import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  initialRecordingView,
  recordingReducer,
  type PlaybackSpeed,
  type RecordingEvent,
  type RecordingView,
} from './recording-player.js';
import { bridgeFailed } from './operator-call.js';

export interface RecordingSlice {
  recordingView: RecordingView;
  /** Reads an SSH action's session recording (actions.recording); playback starts paused at 0. */
  loadRecording(actionId: string): Promise<void>;
  playRecording(): void;
  pauseRecording(): void;
  restartRecording(): void;
  setRecordingSpeed(speed: PlaybackSpeed): void;
  /** The player's clock: wall time passed since its last tick. */
  tickRecording(elapsedMs: number): void;
}

export function createRecordingSlice(api: OperatorApi): StateCreator<RecordingSlice, [], [], RecordingSlice> {
  return (set) => {
    const dispatch = (event: RecordingEvent): void =>
      set((state) => ({ recordingView: recordingReducer(state.recordingView, event) }));
    return {
      recordingView: initialRecordingView,
      loadRecording: async (actionId) => {
        dispatch({ type: 'requested', actionId });
        const reply = await api['actions.recording']({ action_id: actionId }).catch(bridgeFailed);
        dispatch({ type: 'received', actionId, reply });
      },
      playRecording: () => dispatch({ type: 'played' }),
      pauseRecording: () => dispatch({ type: 'paused' }),
      restartRecording: () => dispatch({ type: 'restarted' }),
      setRecordingSpeed: (speed) => dispatch({ type: 'speed_set', speed }),
      tickRecording: (elapsedMs) => dispatch({ type: 'ticked', elapsedMs }),
    };
  };
}
