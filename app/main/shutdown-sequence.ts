/**
 * The desktop's part of quitting: Electron's will-quit gate. The sequence itself (stop intake → bounded drain →
 * close) is the broker host's, shared with the headless daemon (broker/host/shutdown-sequence.ts).
 */

/**
 * Electron's will-quit fires again for every app.quit(); the first one holds the quit and starts the
 * shutdown, later ones while it runs keep holding, and the one after it finished lets the app go.
 */
export type QuitDecision = 'start-shutdown' | 'hold' | 'let-quit';

export function createQuitGate(): { onWillQuit(): QuitDecision; finished(): void } {
  let state: 'running' | 'stopping' | 'stopped' = 'running';
  return {
    onWillQuit() {
      if (state === 'running') {
        state = 'stopping';
        return 'start-shutdown';
      }
      return state === 'stopping' ? 'hold' : 'let-quit';
    },
    finished() {
      state = 'stopped';
    },
  };
}
