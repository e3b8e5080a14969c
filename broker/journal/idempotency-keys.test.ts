import fc from 'fast-check';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { project } from '../core/index.js';
import { sha256Of } from '../testing/action-paths.js';
import { keyBinding, keyedAdmission, keyRetentionMs } from '../testing/keyed-admission.js';
import { replayJournal } from '../testing/replay-journal.js';
import { readStateTables } from '../testing/state-tables.js';
import { tempJournals } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

const { open: tempJournal, disposeOpened } = tempJournals();
afterEach(disposeOpened);

const fpA = sha256Of(0xa);
const fpB = sha256Of(0xb);
describe('when a key is bound at admission', () => {
  it('the binding row lands in the same commit as its PREFLIGHT_VALIDATED, and the event carries key, fingerprint, scope and expiry', async () => {
    const t = await tempJournal();
    const [, validated] = await t.journal.appendBatch(
      keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())),
    );
    expect(validated?.event.payload).toEqual({ idempotency: keyBinding(fpA, t.clock.nowMs()) });
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toEqual({
      route: 'docs',
      scope: 'docs.account',
      key: 'key-1',
      fingerprint: fpA,
      action_id: 'act_first_0001',
      first_seen_ms: validated?.event.at_ms,
      expires_at_ms: t.clock.nowMs() + keyRetentionMs,
      bound_seq: validated?.event.seq,
    });
  });

  it('the same key with the same fingerprint is admitted (a same-key retry) and the first binding stays', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())));
    t.clock.advance(1_000);
    await expect(
      t.journal.appendBatch(keyedAdmission('act_retry_0002', keyBinding(fpA, t.clock.nowMs()))),
    ).resolves.toHaveLength(2);
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      action_id: 'act_first_0001',
      expires_at_ms: keyRetentionMs + t.clock.nowMs() - 1_000,
    });
  });

  it('the same key with another fingerprint is refused as a unit (IDEMPOTENCY_MISMATCH, field idempotency_key): no event, no row change, the journal stays open', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())));
    const before = t.journal.stats().events;
    await expect(
      t.journal.appendBatch(keyedAdmission('act_other_0002', keyBinding(fpB, t.clock.nowMs()))),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH', field: 'idempotency_key' });
    expect(t.journal.stats()).toMatchObject({ events: before, state: 'open' });
    expect(t.journal.getAction('act_other_0002')).toBeUndefined();
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      fingerprint: fpA,
      action_id: 'act_first_0001',
    });
    // Another route or another scope is another key space; the action can still be refused on its own.
    await expect(
      t.journal.appendBatch(keyedAdmission('act_route_0003', keyBinding(fpB, t.clock.nowMs(), { route: 'other' }))),
    ).resolves.toHaveLength(2);
    await expect(
      t.journal.appendBatch(
        keyedAdmission('act_scope_0004', keyBinding(fpB, t.clock.nowMs(), { scope: 'other.account' })),
      ),
    ).resolves.toHaveLength(2);
  });

  it('after the retention window the key is free again: another fingerprint binds it anew', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())));
    t.clock.advance(keyRetentionMs - 1);
    await expect(
      t.journal.appendBatch(keyedAdmission('act_early_0002', keyBinding(fpB, t.clock.nowMs()))),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH' });
    t.clock.advance(1);
    const [, validated] = await t.journal.appendBatch(
      keyedAdmission('act_later_0003', keyBinding(fpB, t.clock.nowMs())),
    );
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      fingerprint: fpB,
      action_id: 'act_later_0003',
      bound_seq: validated?.event.seq,
    });
  });

  it('the binding survives a restart (the idempotency book reads it at open): the reopened journal still refuses the other fingerprint, until the retention passed', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())));
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      await expect(
        reopened.appendBatch(keyedAdmission('act_other_0002', keyBinding(fpB, t.clock.nowMs()))),
      ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH' });
      t.clock.advance(keyRetentionMs);
      await expect(
        reopened.appendBatch(keyedAdmission('act_later_0003', keyBinding(fpB, t.clock.nowMs()))),
      ).resolves.toHaveLength(2);
    } finally {
      await reopened.close();
    }
  });
});

describe('when concurrent admissions race for one key with different fingerprints', () => {
  it('in one group commit exactly one binds: the first in append order; the other unit is refused and the rest of the batch commits', async () => {
    const t = await tempJournal();
    // Same turn of the event loop: one transaction, checked against the bindings planned before it.
    const settled = await Promise.allSettled([
      t.journal.appendBatch(keyedAdmission('act_racer_0001', keyBinding(fpA, t.clock.nowMs()))),
      t.journal.appendBatch(keyedAdmission('act_racer_0002', keyBinding(fpB, t.clock.nowMs()))),
      t.journal.appendBatch(keyedAdmission('act_plain_0003', undefined)),
      t.journal.appendBatch(keyedAdmission('act_racer_0004', keyBinding(fpA, t.clock.nowMs()))),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(settled[1]).toMatchObject({ reason: { code: 'IDEMPOTENCY_MISMATCH' } });
    expect(t.journal.stats().commits).toBe(1);
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      fingerprint: fpA,
      action_id: 'act_racer_0001',
    });
  });

  it('across many interleaved commits, only one fingerprint is ever bound and every admitted action carries it', async () => {
    const t = await tempJournal();
    const attempts = Array.from({ length: 40 }, (_, i) => ({
      id: `act_racer_${String(i).padStart(4, '0')}`,
      fp: i % 3 === 0 ? fpA : i % 3 === 1 ? fpB : sha256Of(0xc),
    }));
    // Three waves so some race inside one commit and some against the stored table.
    const settled: PromiseSettledResult<unknown>[] = [];
    for (const wave of [attempts.slice(0, 13), attempts.slice(13, 27), attempts.slice(27)]) {
      settled.push(
        ...(await Promise.allSettled(
          wave.map((a) => t.journal.appendBatch(keyedAdmission(a.id, keyBinding(a.fp, t.clock.nowMs())))),
        )),
      );
    }
    const row = t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1');
    const admitted = attempts.filter((_, i) => settled[i]?.status === 'fulfilled');
    expect(admitted.length).toBeGreaterThan(0);
    expect(new Set(admitted.map((a) => a.fp))).toEqual(new Set([row?.fingerprint]));
    for (const [i, s] of settled.entries()) {
      if (s.status === 'rejected') expect(s.reason).toMatchObject({ code: 'IDEMPOTENCY_MISMATCH' });
      else expect(attempts[i]?.fp).toBe(row?.fingerprint);
    }
  });
});

describe('when the log is replayed into an empty journal', () => {
  it('the idempotency_keys table is rebuilt row for row (bindings, same-key retries, refusals, a rebinding after expiry)', async () => {
    const live = await tempJournal();
    await live.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, live.clock.nowMs())));
    await live.journal.appendBatch(
      keyedAdmission('act_other_0002', keyBinding(fpA, live.clock.nowMs(), { key: 'key-2' })),
    );
    live.clock.advance(10);
    await live.journal.appendBatch(keyedAdmission('act_retry_0003', keyBinding(fpA, live.clock.nowMs())));
    await expect(
      live.journal.appendBatch(keyedAdmission('act_clash_0004', keyBinding(fpB, live.clock.nowMs()))),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH' });
    live.clock.advance(keyRetentionMs);
    await live.journal.appendBatch(keyedAdmission('act_fresh_0005', keyBinding(fpB, live.clock.nowMs())));

    const target = await tempJournal();
    expect(await replayJournal(live.journal.events(), target.journal, target.clock)).toBe(live.journal.stats().events);
    const tables = readStateTables(live.path);
    expect(tables.idempotency_keys).toHaveLength(2);
    expect(readStateTables(target.path)).toEqual(tables);
    const folded = project(live.journal.events());
    for (const state of live.journal.listActions()) expect(folded.get(state.action_id)).toEqual(state);
  });
});

describe('when generated waves of keyed admissions race, with time passing between them', () => {
  it('an admitted claim always matches the live binding, a refused one always contradicted it, and a replay rebuilds the table', async () => {
    const claim = fc.record({
      key: fc.constantFrom('k1', 'k2'),
      scope: fc.constantFrom('s1', 's2'),
      fp: fc.constantFrom(fpA, fpB),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            claims: fc.array(claim, { minLength: 1, maxLength: 6 }),
            advanceMs: fc.constantFrom(0, 1, keyRetentionMs / 2, keyRetentionMs),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        async (waves) => {
          const live = await tempJournal();
          // The model: what each (scope, key) means and until when, folded in append order.
          const model = new Map<string, { fp: string; expiresAtMs: number }>();
          let n = 0;
          for (const wave of waves) {
            const nowMs = live.clock.nowMs();
            const ids = wave.claims.map(() => `act_gen_${String((n += 1)).padStart(6, '0')}`);
            const settled = await Promise.allSettled(
              wave.claims.map((c, i) =>
                live.journal.appendBatch(
                  keyedAdmission(ids[i] ?? '', keyBinding(c.fp, nowMs, { key: c.key, scope: c.scope })),
                ),
              ),
            );
            for (const [i, c] of wave.claims.entries()) {
              const id = `${c.scope}/${c.key}`;
              const bound = model.get(id);
              const held = bound !== undefined && bound.expiresAtMs > nowMs;
              if (settled[i]?.status === 'fulfilled') {
                expect(!held || bound?.fp === c.fp).toBe(true);
                if (!held) model.set(id, { fp: c.fp, expiresAtMs: nowMs + keyRetentionMs });
              } else {
                expect(settled[i]).toMatchObject({ reason: { code: 'IDEMPOTENCY_MISMATCH' } });
                expect(held && bound?.fp !== c.fp).toBe(true);
              }
            }
            live.clock.advance(wave.advanceMs);
          }
          const target = await tempJournal();
          await replayJournal(live.journal.events(), target.journal, target.clock);
          expect(readStateTables(target.path)).toEqual(readStateTables(live.path));
          await disposeOpened();
        },
      ),
      { numRuns: 20 },
    );
  }, 60_000);
});

describe('when another process writes the idempotency_keys table while the journal is open (THREAT-MODEL)', () => {
  it.each<[string, string]>([
    ['deletes the binding', 'DELETE FROM idempotency_keys WHERE key = ?'],
    ['moves its expiry into the past', 'UPDATE idempotency_keys SET expires_at_ms = 0 WHERE key = ?'],
    [
      "rewrites its fingerprint to the next request's",
      `UPDATE idempotency_keys SET fingerprint = '${fpB}' WHERE key = ?`,
    ],
  ])(
    'a row it %s binds nothing: the same key with another request is still IDEMPOTENCY_MISMATCH',
    async (_what, sql) => {
      const t = await tempJournal();
      await t.journal.appendBatch(keyedAdmission('act_first_0001', keyBinding(fpA, t.clock.nowMs())));
      // The agent's own connection to the file, between two of its admissions.
      const forger = new Database(t.path, { timeout: 5_000 });
      try {
        forger.prepare(sql).run('key-1');
      } finally {
        forger.close();
      }
      // The attack's premise: the table no longer holds the first binding as the journal wrote it.
      expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).not.toMatchObject({
        fingerprint: fpA,
        expires_at_ms: t.clock.nowMs() + keyRetentionMs,
      });
      t.clock.advance(1_000);
      await expect(
        t.journal.appendBatch(keyedAdmission('act_other_0002', keyBinding(fpB, t.clock.nowMs()))),
      ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH', field: 'idempotency_key' });
      expect(t.journal.getAction('act_other_0002')).toBeUndefined();
      // The first request's own retry still binds as a same-key retry.
      await expect(
        t.journal.appendBatch(keyedAdmission('act_retry_0003', keyBinding(fpA, t.clock.nowMs()))),
      ).resolves.toHaveLength(2);
    },
  );
});
