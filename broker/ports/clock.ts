/**
 * Wall time enters the broker only through this port, so the pure core never reads a clock and
 * tests can drive time by hand (broker/testing/fake-clock.ts).
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
}
