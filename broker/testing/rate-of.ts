import { foldMetrics, rateBucketMs, type OutcomeCountRow } from '../core/index.js';

/**
 * The rate foldMetrics gives for `rows` (a journal's outcomeCounts, or a scan), as each outcome's nonzero counts by
 * absolute minute number (at_ms / 60 000), placed from `until_ms`: a count in the wrong minute, or an hour ending in
 * the wrong minute, shows as a different minute here.
 */
export function rateOf(rows: readonly OutcomeCountRow[]): Record<string, Record<number, number>> {
  const { rate } = foldMetrics(rows);
  const out: Record<string, Record<number, number>> = {};
  for (const { outcome, counts } of rate.by_outcome) {
    const first = (rate.until_ms ?? 0) / rateBucketMs - counts.length;
    out[outcome] = Object.fromEntries(counts.flatMap((n, i) => (n === 0 ? [] : [[first + i, n]])));
  }
  return out;
}
