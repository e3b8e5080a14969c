/**
 * A scripted disk for the journal's sync-behind (JournalOpenOptions.beforeSync): open by default; `hold()` makes the
 * next fdatasync wait until `release()`, `fail()` makes the next one fail as a disk would (EIO). Counts the syncs the
 * journal asked for, so a test can see group commit for the disk without timing anything.
 */
export class DiskSyncGate {
  /** fdatasync calls the journal started (each after its gate passed). */
  syncs = 0;
  private held: Array<{ resolve(): void; reject(error: Error): void }> = [];
  private holding = false;
  private failNext = false;
  private readonly arrivals: Array<() => void> = [];

  readonly beforeSync = (): Promise<void> => {
    for (const notify of this.arrivals.splice(0)) notify();
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    }
    if (!this.holding) {
      this.syncs += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.held.push({
        resolve: () => {
          this.syncs += 1;
          resolve();
        },
        reject,
      });
    });
  };

  /** Syncs from now on wait for release(). */
  hold(): void {
    this.holding = true;
  }

  /** Lets the held syncs (and later ones) run. */
  release(): void {
    this.holding = false;
    for (const h of this.held.splice(0)) h.resolve();
  }

  /** The next sync fails (released held ones fail too). */
  fail(): void {
    this.failNext = true;
    for (const h of this.held.splice(0))
      h.reject(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  }

  /** How many syncs are waiting on hold. */
  waiting(): number {
    return this.held.length;
  }

  /** Resolves when the journal next asks for a sync. */
  nextRequest(): Promise<void> {
    return new Promise<void>((resolve) => this.arrivals.push(resolve));
  }
}
