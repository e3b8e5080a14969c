import type { Clock } from '../ports/index.js';

/**
 * Backoff for passphrase checks by one caller (the control socket keys it by the peer's uid, which
 * every same-user process shares, so opening new connections buys an agent nothing): the first
 * `freeFailures` wrong passphrases cost nothing extra, then each failure closes the gate for
 * `firstBackoffMs` doubling up to `backoffMsMax`. While one check of a caller runs, its next is
 * refused too, so a burst never queues Argon2id work. A refusal answers at once with how long to
 * wait; nothing sleeps. The price: an agent can keep a person's CLI decisions waiting up to
 * `backoffMsMax`. The operator web UI's proofs and unlocks go through a gate of their own (one caller,
 * `web`: broker/host/web-proof.ts); the desktop window does not go through one.
 */
export const passphraseAttemptLimits = {
  freeFailures: 3,
  firstBackoffMs: 1_000,
  backoffMsMax: 60_000,
  /** Callers remembered at once; the oldest is forgotten beyond it (uids are few). */
  callersMax: 1_024,
  /** What a refusal while a check runs asks the caller to wait (a 'moderate' Argon2id takes ~1 s). */
  busyRetryMs: 1_000,
} as const;

export type AttemptResult = 'correct' | 'wrong' | 'unchecked';
export type AttemptAdmission = { readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number };

interface CallerState {
  failures: number;
  closedUntilMs: number;
  checking: boolean;
}

export interface PassphraseAttempts {
  /** Admits one check for `caller` (then `settle` must follow) or says how long to wait. */
  admit(caller: string): AttemptAdmission;
  /**
   * Records the check's result ('unchecked': it could not be checked, e.g. no vault; nothing is
   * counted); returns how long the caller must now wait (0 when it may try again at once).
   */
  settle(caller: string, result: AttemptResult): number;
}

export function createPassphraseAttempts(clock: Clock, limits = passphraseAttemptLimits): PassphraseAttempts {
  const callers = new Map<string, CallerState>();
  const stateOf = (caller: string): CallerState => {
    let state = callers.get(caller);
    if (state === undefined) {
      if (callers.size >= limits.callersMax) {
        const oldest = callers.keys().next().value;
        if (oldest !== undefined) callers.delete(oldest);
      }
      state = { failures: 0, closedUntilMs: 0, checking: false };
      callers.set(caller, state);
    }
    return state;
  };
  return {
    admit(caller) {
      const state = stateOf(caller);
      if (state.checking) return { ok: false, retryAfterMs: limits.busyRetryMs };
      const waitMs = state.closedUntilMs - clock.nowMs();
      if (waitMs > 0) return { ok: false, retryAfterMs: waitMs };
      state.checking = true;
      return { ok: true };
    },
    settle(caller, result) {
      const state = stateOf(caller);
      state.checking = false;
      if (result === 'unchecked') return 0;
      if (result === 'correct') {
        callers.delete(caller);
        return 0;
      }
      state.failures += 1;
      const over = state.failures - limits.freeFailures;
      if (over < 0) return 0;
      const waitMs = Math.min(limits.backoffMsMax, limits.firstBackoffMs * 2 ** Math.min(over, 16));
      state.closedUntilMs = clock.nowMs() + waitMs;
      return waitMs;
    },
  };
}
