/**
 * The journal's idempotency book (broker/journal/idempotency-book.ts) at sizes a long retention reaches: its memory
 * per binding, what one commit's move costs, and what a sweep costs the commit that runs it — the filed hours wholly
 * past against a pass over the whole book (what the sweep did before 2026-12-07, every 4,096 bindings).
 *
 *   node --expose-gc --import tsx bench/idempotency-book.ts      (npm run bench:idempotency-book)
 *
 * Not part of the test run. Bounded: at most 1M bindings per row, 5 sweeps timed per row.
 */
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { BoundIdempotencyKey } from '../broker/core/index.js';
import { IdempotencyBook } from '../broker/journal/idempotency-book.js';
import { machineLine, ms, percentile } from './durable-measure.js';

const sizes = [10_000, 100_000, 1_000_000] as const;
const sweepsTimed = 5;
const dayMs = 86_400_000;
const gc = (globalThis as { gc?: () => void }).gc;

/** A binding as an agent's keyed POST makes one: a 32-character key, a sha256 fingerprint, an action id. */
function binding(i: number, nowMs: number): BoundIdempotencyKey {
  return {
    route: 'docs',
    scope: 'docs.account',
    key: `key-${randomBytes(14).toString('hex')}`,
    fingerprint: `sha256:${randomBytes(32).toString('hex')}`,
    action_id: `act_${randomBytes(10).toString('hex')}`,
    first_seen_ms: nowMs - (i % dayMs),
    // Spread over the next 30 days: every binding live, so a sweep frees nothing (its cost is all overhead).
    expires_at_ms: nowMs + 3_600_000 + ((i * 2_591) % (30 * dayMs)),
    bound_seq: i + 1,
  };
}

/** What the sweep did before: every binding visited. */
function wholeBookPass(rows: Map<string, BoundIdempotencyKey>, before: number): number {
  let kept = 0;
  for (const row of rows.values()) if (row.expires_at_ms >= before) kept += 1;
  return kept;
}

function heapUsed(): number {
  gc?.();
  return process.memoryUsage().heapUsed;
}

function main(): void {
  if (gc === undefined) throw new Error('run with node --expose-gc (npm run bench:idempotency-book)');
  console.log(machineLine(tmpdir()));
  console.log(
    '| live bindings | heap per binding | commit move p50 (1 binding) | sweep (filed hours) p50 | whole-book pass p50 |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: |');
  for (const n of sizes) {
    let now = Date.UTC(2026, 11, 7);
    // Rows made as the book reads them at open, held by nothing else: the heap they add is the book's.
    const base = heapUsed();
    const book = new IdempotencyBook(
      (function* () {
        for (let i = 0; i < n; i += 1) yield binding(i, now);
      })(),
      () => now,
    );
    const perBinding = (heapUsed() - base) / n;
    const moves: number[] = [];
    for (let i = 0; i < 2_000; i += 1) {
      const one = binding(n + i, now);
      const t = performance.now();
      book.committed([one]);
      moves.push(performance.now() - t);
    }
    const sweeps: number[] = [];
    const passes: number[] = [];
    const byId = new Map(Array.from({ length: n }, (_, i) => binding(i, now)).map((r) => [r.key, r]));
    for (let i = 0; i < sweepsTimed; i += 1) {
      now += 61_000;
      let t = performance.now();
      book.sweep();
      sweeps.push(performance.now() - t);
      t = performance.now();
      wholeBookPass(byId, now - dayMs);
      passes.push(performance.now() - t);
    }
    if (book.size() < n) throw new Error('a live binding was let go');
    console.log(
      `| ${n.toLocaleString('en-US')} | ${Math.round(perBinding)} B | ${(percentile(moves, 50) * 1000).toFixed(1)} µs | ` +
        `${(percentile(sweeps, 50) * 1000).toFixed(1)} µs | ${ms(percentile(passes, 50))} ms |`,
    );
  }
}

main();
