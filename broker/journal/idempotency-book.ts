import { createHash } from 'node:crypto';
import { idempotencyKeyId, type BoundIdempotencyKey, type KeyBinding } from '../core/index.js';

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
 * It keeps only what deciding a claim needs (bindIdempotencyKey): per binding, a 16-byte SHA-256 digest of route,
 * scope and key (an agent chooses keys, but a collision of 128 bits of SHA-256 is out of its reach) and one 40-byte
 * string of the expiry and the fingerprint's 32 bytes: ~0.12 KB a binding, where whole rows took ~0.47
 * (docs/benchmarks.md, "The idempotency book"). Memory still grows with keyed requests × retention. Letting expired
 * bindings go costs each O(1) once, spread over the commits: a sweep (at most once a minute, on a commit) visits only
 * the hours of expiry wholly past the margin and the bindings filed under them, never the whole book.
 */
export class IdempotencyBook {
  /** Digest of (route, scope, key) → the packed binding (packBinding), or as read when it does not pack. */
  private readonly byKey = new Map<string, string | KeyBinding>();
  /** Hour of expiry → the digests filed under it (a rebound key is filed again; the sweep checks its own expiry). */
  private readonly byExpiryHour = new Map<number, string[]>();
  private nextSweepAtMs: number;

  constructor(
    loaded: Iterable<BoundBinding>,
    private readonly nowMs: () => number,
  ) {
    for (const row of loaded) this.file(row);
    this.nextSweepAtMs = nowMs() + sweepEveryMs;
  }

  get(route: string, scope: string, key: string): KeyBinding | undefined {
    const held = this.byKey.get(keyDigest(route, scope, key));
    return typeof held === 'string' ? unpackBinding(held) : held;
  }

  /** After COMMIT only: the bindings that commit wrote. */
  committed(written: Iterable<BoundBinding>): void {
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
    for (const [hour, digests] of this.byExpiryHour) {
      if ((hour + 1) * expiryBucketMs > before) continue;
      for (const digest of digests) {
        const held = this.byKey.get(digest);
        const expiresAtMs = typeof held === 'string' ? packedExpiry(held) : held?.expires_at_ms;
        if (expiresAtMs !== undefined && expiresAtMs < before) this.byKey.delete(digest);
      }
      this.byExpiryHour.delete(hour);
    }
  }

  size(): number {
    return this.byKey.size;
  }

  private file(row: BoundBinding): void {
    const digest = keyDigest(row.route, row.scope, row.key);
    this.byKey.set(digest, packBinding(row));
    const hour = Math.floor(row.expires_at_ms / expiryBucketMs);
    const filed = this.byExpiryHour.get(hour);
    if (filed === undefined) this.byExpiryHour.set(hour, [digest]);
    else filed.push(digest);
  }
}

/** What the book is given of a binding (the table's read at open selects only these). */
export type BoundBinding = Pick<BoundIdempotencyKey, 'route' | 'scope' | 'key' | 'fingerprint' | 'expires_at_ms'>;

const fingerprintPrefix = 'sha256:';
const fingerprintPattern = /^sha256:[0-9a-f]{64}$/;

function keyDigest(route: string, scope: string, key: string): string {
  return createHash('sha256')
    .update(idempotencyKeyId(route, scope, key))
    .digest()
    .toString('latin1', 0, 16);
}

/**
 * The expiry (8 bytes, float64) and the fingerprint's 32 bytes, as one flat one-byte string. The journal writes only
 * sha256:<64 hex> (the event schema's); a row read at open that holds anything else (edited while no broker ran) is
 * kept as read, never packed lossily nor refused: its key stays bound to what the row says, as any row read at open.
 */
function packBinding(row: BoundBinding): string | KeyBinding {
  if (!fingerprintPattern.test(row.fingerprint))
    return { fingerprint: row.fingerprint, expires_at_ms: row.expires_at_ms };
  const bytes = Buffer.allocUnsafe(40);
  bytes.writeDoubleLE(row.expires_at_ms, 0);
  bytes.write(row.fingerprint.slice(fingerprintPrefix.length), 8, 'hex');
  return bytes.toString('latin1');
}

function unpackBinding(packed: string): KeyBinding {
  const bytes = Buffer.from(packed, 'latin1');
  return { expires_at_ms: bytes.readDoubleLE(0), fingerprint: `${fingerprintPrefix}${bytes.toString('hex', 8)}` };
}

function packedExpiry(packed: string): number {
  return Buffer.from(packed.slice(0, 8), 'latin1').readDoubleLE(0);
}

/** The oldest expiry a binding read at open may have and still matter (see expiredKeptMs). */
export function liveBindingsFromMs(nowMs: number): number {
  return nowMs - expiredKeptMs;
}
