import { idempotencyKeyId, type BoundIdempotencyKey } from '../core/index.js';

/**
 * A binding is kept this long past its expiry before it is let go: a key past `expires_at_ms` is free again
 * (bindIdempotencyKey decides on the claim's wall time), so dropping it changes no decision as long as the wall clock
 * does not step back by more than this.
 */
const expiredKeptMs = 24 * 60 * 60 * 1000;
/** Expired bindings are swept after this many new ones, so the sweep's cost is spread over the bindings it frees. */
const sweepEveryBindings = 4096;

/**
 * Every idempotency-key binding still within its remote's retention, as this journal knows it: read from the
 * `idempotency_keys` table once, when the journal opens, then moved only by this journal's own commits. The running
 * broker decides from it whether a key is bound to another request (IDEMPOTENCY_MISMATCH) and never from a later read
 * of the table. The table is plaintext and any process of the user can write it while the broker runs (THREAT-MODEL):
 * a deleted row, a changed fingerprint or an expiry moved into the past would let one key be sent with a second,
 * different request, which a remote may answer with the first request's stored response — recorded as if the second
 * had taken effect. Like the session book, a row edited while no broker runs is trusted at the next open.
 */
export class IdempotencyBook {
  private readonly byKey = new Map<string, BoundIdempotencyKey>();
  private boundSinceSweep = 0;

  constructor(
    loaded: Iterable<BoundIdempotencyKey>,
    private readonly nowMs: () => number,
  ) {
    for (const row of loaded) this.byKey.set(idempotencyKeyId(row.route, row.scope, row.key), row);
  }

  get(route: string, scope: string, key: string): BoundIdempotencyKey | undefined {
    return this.byKey.get(idempotencyKeyId(route, scope, key));
  }

  /** After COMMIT only: the bindings that commit wrote. */
  committed(written: Iterable<BoundIdempotencyKey>): void {
    for (const row of written) {
      this.byKey.set(idempotencyKeyId(row.route, row.scope, row.key), row);
      this.boundSinceSweep += 1;
    }
    if (this.boundSinceSweep >= sweepEveryBindings) this.sweep();
  }

  /** Lets go of the bindings expired more than expiredKeptMs ago. */
  sweep(): void {
    this.boundSinceSweep = 0;
    const before = this.nowMs() - expiredKeptMs;
    for (const [id, row] of this.byKey) if (row.expires_at_ms < before) this.byKey.delete(id);
  }

  size(): number {
    return this.byKey.size;
  }
}

/** The oldest expiry a binding read at open may have and still matter (see expiredKeptMs). */
export function liveBindingsFromMs(nowMs: number): number {
  return nowMs - expiredKeptMs;
}
