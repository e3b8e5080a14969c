import { randomFillSync } from 'node:crypto';

/**
 * Random bytes from node:crypto drawn a pool at a time: one call into the CSPRNG per pool, not one per id or nonce
 * (a small randomBytes costs ~20 µs on a loaded 2-vCPU machine, a pool of a few KiB about the same). Each refill is
 * a new buffer, so a slice handed out earlier is never overwritten. Bytes are never handed out twice.
 */
export class RandomPool {
  private pool = Buffer.alloc(0);
  private at = 0;

  constructor(private readonly poolBytes = 4_096) {}

  /** `n` fresh random bytes, a view into the current pool. */
  take(n: number): Buffer {
    if (n > this.poolBytes) return randomFillSync(Buffer.alloc(n));
    if (this.at + n > this.pool.length) {
      this.pool = randomFillSync(Buffer.alloc(this.poolBytes));
      this.at = 0;
    }
    const bytes = this.pool.subarray(this.at, this.at + n);
    this.at += n;
    return bytes;
  }
}
