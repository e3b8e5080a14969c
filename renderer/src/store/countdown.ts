/**
 * The card's expiry countdown, e.g. "4:59 left", "1:02:03 left", "expiring…". Pure: `nowMs` comes
 * from the view's ticking clock. The broker's timer decides the expiry (an EXPIRED event); this
 * only shows how long the person has, so at zero it says "expiring…" until the card leaves with
 * its recorded reason. Same machine as the broker, so the two clocks agree.
 */
export function formatCountdown(expiresAtMs: number, nowMs: number): string {
  const leftMs = expiresAtMs - nowMs;
  if (leftMs <= 0) return 'expiring…';
  const totalSeconds = Math.ceil(leftMs / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  const mmss = `${hours > 0 ? `${String(minutes).padStart(2, '0')}` : String(minutes)}:${String(seconds).padStart(2, '0')}`;
  return `${hours > 0 ? `${hours}:` : ''}${mmss} left`;
}

/** Under this, the countdown is shown as urgent. */
export const countdownUrgentMs = 30_000;
