import { idempotencyKeyId, type BoundIdempotencyKey } from '../core/index.js';

/**
 * A binding is kept this long past its expiry before it is let go: a key past `expires_at_ms` is free again
 * (bindIdempotencyKey decides on the claim's wall time), so dropping it changes no decision as long as the wall clock
 * does not step back by more than this.
 */
const expiredKeptMs = 24 * 60 * 60 * 1000;
/** Expired bindings are swept at most this often, when a commit moves the book (never on a timer of its own). */
const sweepEveryMs = 60 * 1000;
/** Bindings are filed by the hour they expire in, so a sweep visits only the hours wholly past and what they hold. */
const expiryBucketMs = 60 * 60 * 1000;

/**
 * Every idempotency-key binding still within its remote's retention, as this journal knows it: read from the
 * `idempotency_keys` table once, when the journal opens, then moved only by this journal's own commits. The running
 * broker decides from it whether a key is bound to another request (IDEMPOTENCY_MISMATCH) and never from a later read
 * of the table. The table is plaintext and any process of the user can write it while the broker runs (THREAT-MODEL):
 * a deleted row, a changed fingerprint or an expiry moved into the past would let one key be sent with a second,
 * different request, which a remote may answer with the first request's stored response — recorded as if the second
 * had taken effect. Like the session book, a row edited while no broker runs is trusted at the next open.
 *
 * Memory is one entry per binding within retention (~0.5 KB: docs/benchmarks.md, "The idempotency book"). Letting
 * expired ones go costs each binding O(1) once, spread over the commits: a sweep (at most once a minute, on a commit)
 * visits only the hours of expiry wholly past the margin and the bindings filed under them, never the whole book.
 */
export class IdempotencyBook {
  private readonly byKey = new Map<string, BoundIdempotencyKey>();
  /** Hour of expiry → the ids filed under it (a rebound key is filed again; the sweep checks the row's own expiry). */
  private readonly byExpiryHour = new Map<number, string[]>();
  private nextSweepAtMs: number;

  constructor(
    loaded: Iterable<BoundIdempotencyKey>,
    private readonly nowMs: () => number,
  ) {
    for (const row of loaded) this.file(row);
    this.nextSweepAtMs = nowMs() + sweepEveryMs;
  }

  get(route: string, scope: string, key: string): BoundIdempotencyKey | undefined {
    return this.byKey.get(idempotencyKeyId(route, scope, key));
  }

  /** After COMMIT only: the bindings that commit wrote. */
  committed(written: Iterable<BoundIdempotencyKey>): void {
    for (const row of written) this.file(row);
    if (this.nowMs() >= this.nextSweepAtMs) this.sweep();
  }

  /**
   * Lets go of the bindings expired more than expiredKeptMs ago: the hours wholly before that, and of each only the
   * bindings whose own expiry is still that old (a key rebound since is filed under its new hour and stays).
   */
  sweep(): void {
    const now = this.nowMs();
    this.nextSweepAtMs = now + sweepEveryMs;
    const before = now - expiredKeptMs;
    for (const [hour, ids] of this.byExpiryHour) {
      if ((hour + 1) * expiryBucketMs > before) continue;
      for (const id of ids) {
        const row = this.byKey.get(id);
        if (row !== undefined && row.expires_at_ms < before) this.byKey.delete(id);
      }
      this.byExpiryHour.delete(hour);
    }
  }

  size(): number {
    return this.byKey.size;
  }

  private file(row: BoundIdempotencyKey): void {
    const id = idempotencyKeyId(row.route, row.scope, row.key);
    this.byKey.set(id, row);
    const hour = Math.floor(row.expires_at_ms / expiryBucketMs);
    const filed = this.byExpiryHour.get(hour);
    if (filed === undefined) this.byExpiryHour.set(hour, [id]);
    else filed.push(id);
  }
}

/** The oldest expiry a binding read at open may have and still matter (see expiredKeptMs). */
export function liveBindingsFromMs(nowMs: number): number {
  return nowMs - expiredKeptMs;
}
