import { describe, expect, it } from 'vitest';
import { coalescedRefresh } from './coalesced-refresh.js';

const startDeadlineMs = 2_000;

/** A read the test answers by hand; `started(n)` resolves once n reads have begun, `most` is the most ever open at once. */
function scriptedReads() {
  const reads: Array<{ answer(): void; fail(error: Error): void }> = [];
  const waiting: Array<{ n: number; resolve(): void }> = [];
  let open = 0;
  let most = 0;
  const read = () =>
    new Promise<void>((resolve, reject) => {
      open += 1;
      most = Math.max(most, open);
      const close = () => (open -= 1);
      reads.push({ answer: () => (close(), resolve()), fail: (error) => (close(), reject(error)) });
      for (const w of waiting.filter((w) => reads.length >= w.n)) w.resolve();
    });
  // A deadline, not a sleep: it resolves the moment the n-th read begins, and fails loudly if it never does.
  const started = (n: number) =>
    reads.length >= n
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          const deadline = setTimeout(
            () => reject(new Error(`expected read ${n} to begin; ${reads.length} began`)),
            startDeadlineMs,
          );
          waiting.push({ n, resolve: () => (clearTimeout(deadline), resolve()) });
        });
  return { read, reads, started, most: () => most };
}

describe('coalescedRefresh', () => {
  describe('when asks come while a read is in flight', () => {
    it('folds however many into exactly one more read after it, never two at once', async () => {
      const { read, reads, started, most } = scriptedReads();
      const refresh = coalescedRefresh(read);
      const first = refresh.run();
      const folded = Array.from({ length: 5 }, () => refresh.run());
      expect(reads).toHaveLength(1);
      reads[0]?.answer();
      await started(2);
      reads[1]?.answer();
      await Promise.all([first, ...folded]);
      expect(reads).toHaveLength(2);
      expect(most()).toBe(1);
    });

    it('resolves the asks only after the read that follows them', async () => {
      const { read, reads, started } = scriptedReads();
      const refresh = coalescedRefresh(read);
      void refresh.run();
      let settled = false;
      const folded = refresh.run().then(() => (settled = true));
      reads[0]?.answer();
      await started(2);
      expect(settled).toBe(false);
      reads[1]?.answer();
      await folded;
      expect(reads).toHaveLength(2);
    });

    it('reads once per ask when the asks do not overlap', async () => {
      const { read, reads } = scriptedReads();
      const refresh = coalescedRefresh(read);
      for (let i = 1; i <= 3; i += 1) {
        const ask = refresh.run();
        expect(reads).toHaveLength(i);
        reads[i - 1]?.answer();
        await ask;
      }
    });
  });

  describe('when an ask comes just as a read ends', () => {
    // Each count of microtask turns lands the ask at another point of the read's end (before the loop's last
    // look, between it and the slot being freed, after): every one must be answered by a read that began after it.
    it.each([0, 1, 2, 3, 4])(
      'is answered by a read that begins after it (%i turns after the answer)',
      async (turns) => {
        const { read, reads, started } = scriptedReads();
        const refresh = coalescedRefresh(read);
        const first = refresh.run();
        reads[0]?.answer();
        for (let turn = 0; turn < turns; turn += 1) await Promise.resolve();
        let settled = false;
        const ask = refresh.run().then(() => (settled = true));
        await started(2);
        expect(settled).toBe(false);
        reads[1]?.answer();
        await Promise.all([first, ask]);
        expect(reads).toHaveLength(2);
      },
    );
  });

  describe('when a read fails', () => {
    it('rejects the asks folded into it too, and the next ask reads at once', async () => {
      const { read, reads, started } = scriptedReads();
      const refresh = coalescedRefresh(read);
      const first = refresh.run();
      const folded = refresh.run();
      reads[0]?.answer();
      await started(2);
      reads[1]?.fail(new Error('bridge gone'));
      await expect(first).rejects.toThrow('bridge gone');
      await expect(folded).rejects.toThrow('bridge gone');
      const next = refresh.run();
      expect(reads).toHaveLength(3);
      reads[2]?.answer();
      await next;
    });

    it('does not wedge the slot', async () => {
      const { read, reads } = scriptedReads();
      const refresh = coalescedRefresh(read);
      const first = refresh.run();
      reads[0]?.fail(new Error('bridge gone'));
      await expect(first).rejects.toThrow('bridge gone');
      const next = refresh.run();
      expect(reads).toHaveLength(2);
      reads[1]?.answer();
      await next;
    });
  });

  describe('when the caller restarts while a read is in flight', () => {
    it("reads at once, and the abandoned read neither reads again nor frees the new read's slot", async () => {
      const { read, reads, started } = scriptedReads();
      const refresh = coalescedRefresh(read);
      const stale = refresh.run();
      void refresh.run();
      refresh.restart();
      const fresh = refresh.run();
      expect(reads).toHaveLength(2);
      reads[0]?.answer();
      await stale;
      // The new read is still out: this ask folds into one more read after it instead of a third read now.
      void refresh.run();
      expect(reads).toHaveLength(2);
      reads[1]?.answer();
      await started(3);
      reads[2]?.answer();
      await fresh;
      expect(reads).toHaveLength(3);
    });
  });
});
