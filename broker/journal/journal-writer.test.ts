import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { verifyJournal } from '../audit/verify-journal.js';
import { isCodedError, type NewEvent } from '../contract/index.js';
import { decodeFrontier, frontierRoot } from '../core/index.js';
import { actionPathNames, actionPaths, impossibleEvents, sha256Of } from '../testing/action-paths.js';
import { appendUptoCommitted, resultOf } from '../testing/committed-result.js';
import { keyBinding, keyedAdmission } from '../testing/keyed-admission.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { inSession, sessionStartedEvent } from '../testing/session-events.js';
import { readStateTables } from '../testing/state-tables.js';
import { openTempJournal, openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import { AuditWriter } from './audit-writer.js';
import { sha256 } from './event-cipher.js';
import { Journal, type JournalOpenOptions } from './journal.js';
import { JournalWriter, type WriteAck, type WriteBatch, type WriterOp } from './journal-writer.js';
import { ResultStore } from './result-store.js';
import { WriterThread } from './writer-thread.js';

function storedResults(path: string): unknown[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT result_id, action_id, attempt FROM results ORDER BY result_id`).all();
  } finally {
    db.close();
  }
}

describe('a result that clashes with a unique key of the results table is refused while the commit is planned', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => ({ temp, store } = await openTempResultStore()));
  afterEach(() => temp.dispose());

  it('the same result id twice in one commit: the second unit is refused with the primary key constraint, the first lands', async () => {
    const first = await appendUptoCommitted(temp.journal, 'act_clash_a');
    const second = await appendUptoCommitted(temp.journal, 'act_clash_b');
    // Same turn of the event loop: one transaction plans both units.
    const landed = temp.journal.append(first, store.rowsOf(resultOf('act_clash_a', 'res_clash')));
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_b', 'res_clash')));
    await expect(clash).rejects.toMatchObject({
      code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
      message: 'UNIQUE constraint failed: results.result_id',
    });
    expect((await landed).state.stage).toBe('result_committed');
    expect(temp.journal.stats().state).toBe('open');
    expect(temp.journal.getAction('act_clash_b')?.stage).not.toBe('result_committed');
    expect(storedResults(temp.path)).toEqual([{ result_id: 'res_clash', action_id: 'act_clash_a', attempt: 1 }]);
  });

  it("an action's attempt the table already holds under another result id: refused with the unique constraint, the rest of the commit lands", async () => {
    const first = await appendUptoCommitted(temp.journal, 'act_clash_c');
    await temp.journal.append(first, store.rowsOf(resultOf('act_clash_c', 'res_clash_c')));
    const second = await appendUptoCommitted(temp.journal, 'act_clash_d');
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_c', 'res_clash_d')));
    const neighbour = temp.journal.append(actionPaths.httpNoApproval('act_clash_e')[0] as NewEvent);
    await expect(clash).rejects.toMatchObject({
      code: 'SQLITE_CONSTRAINT_UNIQUE',
      message: 'UNIQUE constraint failed: results.action_id, results.attempt',
    });
    expect((await neighbour).state.action_id).toBe('act_clash_e');
    expect(temp.journal.stats().state).toBe('open');
    expect(storedResults(temp.path)).toEqual([{ result_id: 'res_clash_c', action_id: 'act_clash_c', attempt: 1 }]);
  });

  it('an attempt planned earlier in the same commit, with the same result id too: the unique constraint, as SQLite checks it first', async () => {
    const first = await appendUptoCommitted(temp.journal, 'act_clash_f');
    const second = await appendUptoCommitted(temp.journal, 'act_clash_g');
    const landed = temp.journal.append(first, store.rowsOf(resultOf('act_clash_f', 'res_clash_f')));
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_f', 'res_clash_f')));
    await expect(clash).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_UNIQUE' });
    await landed;
    // A later attempt of the same action is not a clash.
    const third = await appendUptoCommitted(temp.journal, 'act_clash_h');
    await temp.journal.append(third, store.rowsOf(resultOf('act_clash_f', 'res_clash_f2', 2)));
    expect(temp.journal.stats().state).toBe('open');
    expect(storedResults(temp.path)).toEqual([
      { result_id: 'res_clash_f', action_id: 'act_clash_f', attempt: 1 },
      { result_id: 'res_clash_f2', action_id: 'act_clash_f', attempt: 2 },
    ]);
  });
});

/** The audit tables outside the log, read through another connection (keys and signatures are fresh each run). */
function auditTables(path: string): Record<string, unknown> {
  const db = new Database(path, { readonly: true });
  try {
    const all = (sql: string): unknown[] => db.prepare(sql).all();
    return {
      checkpoints: all(
        `SELECT size, at_ms, reason, length(root) AS root, length(signature) AS signature FROM checkpoints ORDER BY size`,
      ),
      audit_keys: all(
        `SELECT length(box_public) AS box_public, length(sign_public) AS sign_public, length(box_secret_wrapped) > 0 AS box_wrapped, length(sign_secret_wrapped) > 0 AS sign_wrapped, created_at_ms FROM audit_keys`,
      ),
      audit_runs: all(
        `SELECT run, started_at_ms, sealed_key IS NOT NULL AS sealed, ended_at_ms, end_reason FROM audit_runs ORDER BY run`,
      ),
      integrity_anchor: all(`SELECT counter, head_seq, key_id, written_at_ms FROM integrity_anchor`),
    };
  } finally {
    db.close();
  }
}

/** Every table a commit writes, read through another connection in key order (sealed bytes left out: fresh nonces). */
function writtenTables(path: string): Record<string, unknown> {
  const db = new Database(path, { readonly: true });
  try {
    const all = (sql: string): unknown[] => db.prepare(sql).all();
    return {
      ...readStateTables(path),
      events: all(`SELECT seq, at_ms, action_id, session_id, ticket, lane, kind, run FROM events ORDER BY seq`),
      action_counters: all(
        `SELECT * FROM action_counters ORDER BY phase, outcome, code, decision, dispatched, in_flight`,
      ),
      outcome_minutes: all(`SELECT * FROM outcome_minutes ORDER BY minute, phase, outcome, code, decision, dispatched`),
      results: all(
        `SELECT result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms, run FROM results ORDER BY result_id`,
      ),
      result_chunks: all(`SELECT result_id, n, length(bytes) AS bytes FROM result_chunks ORDER BY result_id, n`),
      last_ticket: all(`SELECT value FROM meta WHERE key = 'last_ticket'`),
      audit_tree: all(`SELECT size FROM audit_tree`),
    };
  } finally {
    db.close();
  }
}

/**
 * The same workload every time: every action path (half of them in a session), cut short for some so that recovery
 * at the next open classifies them, an idempotency key bound, a result with each RESULT_COMMITTED, impossible events
 * and a result id clash refused beside accepted units, each wave one group commit; the vault locked and unlocked
 * between waves, checkpoints every 40 events and an anchor recorded, so that every audit write outside a commit runs
 * too (keys, the run key sealed, checkpoints at interval, lock, unlock and shutdown, an anchor's record, the run's end);
 * then a restart (recovery commits). Answers each append's outcome, and the journal's tables (the audit tables too) and
 * events after the restart.
 */
async function runWorkload(
  thread: Pick<JournalOpenOptions, 'writerThread' | 'threadBatchEventsMin' | 'writerThreadIdleMs'> = {
    writerThread: false,
  },
): Promise<{ outcomes: string[]; tables: Record<string, unknown>; events: unknown[]; recovered: number }> {
  const temp = await openTempJournal({ checkpointEveryEvents: 40, ...thread });
  let store = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
  try {
    await temp.journal.appendSession(sessionStartedEvent('ses_writer', 4242));
    const scripts = actionPathNames.map((name, i) => {
      const events = inSession(actionPaths[name](`act_w_${name.slice(0, 24)}`), i % 2 === 0 ? 'ses_writer' : null);
      return i % 5 === 4 ? events.slice(0, Math.ceil(events.length / 2)) : events;
    });
    scripts.push(keyedAdmission('act_w_keyed', keyBinding(sha256Of(0xa), temp.clock.nowMs())));
    const outcomes: string[] = [];
    const longest = Math.max(...scripts.map((script) => script.length));
    for (let wave = 0; wave < longest; wave += 1) {
      const appends = scripts
        .flatMap((script) => script.slice(wave, wave + 1))
        .map((event) => {
          if (event.kind !== 'RESULT_COMMITTED') return temp.journal.append(event);
          const { result_id, attempt } = event.payload;
          const rows = store.rowsOf({
            result_id,
            action_id: event.action_id,
            attempt,
            summary: { status: 200 },
            body: Buffer.alloc(70_000 + wave, wave),
            total_bytes: 70_000 + wave,
            truncated: false,
            digest: sha256Of(wave),
            created_at_ms: temp.clock.nowMs(),
          });
          return temp.journal.append(event, rows);
        });
      if (wave % 3 === 1) appends.push(...impossibleEvents('act_w_keyed').map((event) => temp.journal.append(event)));
      if (wave === 6) {
        const clash = store.rowsOf({
          result_id: 'res_w_clash',
          action_id: 'act_w_keyed',
          attempt: 1,
          summary: {},
          body: Buffer.from('x'),
          total_bytes: 1,
          truncated: false,
          digest: sha256Of(7),
          created_at_ms: 1,
        });
        // The same result id twice in one commit, on events the projection accepts: the second is refused.
        appends.push(temp.journal.append(carrierOf(wave), clash));
        appends.push(temp.journal.append(carrierOf(wave + 1), { ...clash }));
      }
      for (const settled of await Promise.allSettled(appends)) {
        if (settled.status === 'fulfilled') outcomes.push(`ok ${settled.value.event.seq}`);
        else if (isCodedError(settled.reason) || 'code' in settled.reason) outcomes.push(String(settled.reason.code));
        else throw settled.reason;
      }
      if (wave === 3) temp.vault.lock('idle');
      if (wave === 5) temp.vault.unlock();
      if (wave === 5) {
        const record = { counter: wave, head_seq: temp.journal.stats().last_seq, key_id: 'key-w', written_at_ms: 9 };
        expect(temp.journal.recordAnchor(record)).toBe(true);
      }
      temp.clock.advance(20_000);
    }
    store.close();
    await temp.journal.close();
    const reopened = await Journal.open({ path: temp.path, clock: temp.clock, vault: temp.vault, ...thread });
    const recovered = reopened.stats().recovered_at_open;
    expect(recovered).toBeGreaterThan(0);
    store = ResultStore.open(temp.path, reopened.rowCipher(), { role: 'broker' });
    const bodies = writtenTables(temp.path).results as Array<{ result_id: string }>;
    for (const { result_id } of bodies) expect(store.read(result_id)?.body.length).toBeGreaterThan(0);
    const events = [...reopened.events()];
    store.close();
    await reopened.close();
    expect(await verifyJournal({ dbPath: temp.path })).toMatchObject({ ok: true });
    return { outcomes, tables: { ...writtenTables(temp.path), ...auditTables(temp.path) }, events, recovered };
  } finally {
    store.close();
    await temp.dispose();
  }
}

/** `value` with every Buffer as the Uint8Array a structured clone makes of it (the same bytes), all else as is. */
function bytesAsUint8Arrays(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return new Uint8Array(value);
  if (Array.isArray(value)) return value.map(bytesAsUint8Arrays);
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, bytesAsUint8Arrays(field)]));
}

/** An event any journal accepts, to carry rows: a new action's ACTION_ACCEPTED. */
function carrierOf(n: number): NewEvent {
  return actionPaths.httpNoApproval(`act_w_carrier_${n}`)[0] as NewEvent;
}

describe('the JournalWriter writes a commit from a plain-data batch', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a structured clone of every batch (what postMessage to a writer thread makes) leaves the same tables and events as the batch itself', async () => {
    const inline = await runWorkload();

    const batches: Array<{ batch: WriteBatch; cloned: WriteBatch }> = [];
    const acks: WriteAck[] = [];
    const commit = JournalWriter.prototype.commit;
    vi.spyOn(JournalWriter.prototype, 'commit').mockImplementation(function (this: JournalWriter, batch) {
      const cloned = structuredClone(batch);
      batches.push({ batch, cloned });
      // The ack crosses back: the loop moves its committed tree head from a copy.
      const ack = structuredClone(commit.call(this, cloned));
      acks.push(ack);
      return ack;
    });
    const ops: Array<{ op: WriterOp; cloned: WriterOp }> = [];
    const write = JournalWriter.prototype.write;
    vi.spyOn(JournalWriter.prototype, 'write').mockImplementation(function (this: JournalWriter, op) {
      const cloned = structuredClone(op);
      ops.push({ op, cloned });
      return write.call(this, cloned);
    });
    const replayed = await runWorkload();

    expect(replayed.outcomes).toEqual(inline.outcomes);
    expect(replayed).toEqual(inline);
    expect(inline.outcomes).toContain('SQLITE_CONSTRAINT_UNIQUE');
    expect(inline.outcomes).toContain('IMPOSSIBLE_TRANSITION');
    // The clones equal what was cloned (bytes stay bytes: a Buffer comes back a Uint8Array), and so do the acks.
    for (const { batch, cloned } of batches) expect(cloned).toStrictEqual(bytesAsUint8Arrays(batch));
    for (const ack of acks) expect(structuredClone(ack)).toStrictEqual(ack);
    // Every kind of row a batch carries went through a clone: results, sessions, keys, tickets, both kinds of row write.
    const cloned = batches.map((b) => b.cloned);
    expect(cloned.some((b) => b.rows.length > 0)).toBe(true);
    expect(cloned.some((b) => b.sessions.length > 0)).toBe(true);
    expect(cloned.some((b) => b.idempotencyKeys.length > 0)).toBe(true);
    expect(cloned.some((b) => b.lastTicket !== null)).toBe(true);
    expect(cloned.some((b) => b.actions.some((a) => a.written !== undefined))).toBe(true);
    expect(cloned.some((b) => b.actions.some((a) => a.written === undefined && a.stored !== undefined))).toBe(true);
    expect(acks.at(-1)?.treeSize).toBe(inline.events.length);
    // Every writer op crossed as a clone too, each kind of them, and left the same audit tables.
    for (const { op, cloned } of ops) expect(cloned).toStrictEqual(bytesAsUint8Arrays(op));
    expect(new Set(ops.map(({ op }) => op.kind))).toEqual(
      new Set(['auditKeys', 'runKeySealed', 'checkpoint', 'anchorRecorded', 'runEnded']),
    );
    const reasons = (inline.tables.checkpoints as Array<{ reason: string }>).map((c) => c.reason);
    for (const reason of ['interval', 'lock', 'unlock', 'shutdown']) expect(reasons).toContain(reason);
    expect(inline.tables.audit_keys).toHaveLength(1);
    expect(inline.tables.integrity_anchor).toHaveLength(1);
    expect(inline.tables.audit_runs).toMatchObject([{ run: 0 }, { end_reason: 'closed' }, { end_reason: 'closed' }]);
  });

  it('a constraint the batch meets when writing fails the commit (nothing was refused while planning it)', async () => {
    const { temp, store } = await openTempResultStore({ writerThread: false });
    try {
      const first = await appendUptoCommitted(temp.journal, 'act_w_fatal');
      const rows = store.rowsOf(resultOf('act_w_fatal', 'res_w_fatal'));
      // Written behind the planner's back (no journal path does this): the writer meets the primary key.
      store.commit(resultOf('act_w_other', 'res_w_fatal'));
      const commit = JournalWriter.prototype.commit;
      vi.spyOn(JournalWriter.prototype, 'commit').mockImplementation(function (this: JournalWriter, batch) {
        return commit.call(this, { ...batch, rows: [...batch.rows, rows] });
      });
      await expect(temp.journal.append(first)).rejects.toMatchObject({
        code: 'JOURNAL_UNAVAILABLE',
        cause: { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' },
      });
      expect(temp.journal.stats().state).toBe('failed');
    } finally {
      await temp.dispose();
    }
  });
});

describe('on a writer thread (JournalOpenOptions.writerThread)', () => {
  afterEach(() => vi.restoreAllMocks());

  it('every batch on the thread: the same workload leaves the same tables, audit tables, events and outcomes as the inline writer', async () => {
    const inline = await runWorkload();
    // On the loop's own JournalWriter, only recovery's commits at open: every other batch and op went to the thread,
    // the records recovery deferred to the unlock among them (an idempotent action's: restartRetryRestsOnRow).
    const onLoop = vi.spyOn(JournalWriter.prototype, 'commit');
    const opsOnLoop = vi.spyOn(JournalWriter.prototype, 'write');
    const threaded = await runWorkload({ writerThread: true, threadBatchEventsMin: 1 });
    const kindsOnLoop = onLoop.mock.calls.flatMap(([batch]) => batch.events).map((e) => e.kind);
    expect(kindsOnLoop.length).toBeGreaterThan(0);
    expect(kindsOnLoop.length).toBeLessThanOrEqual(threaded.recovered);
    expect(kindsOnLoop).toEqual(kindsOnLoop.map(() => 'OUTCOME_RECORDED'));
    expect(opsOnLoop).not.toHaveBeenCalled();
    expect(threaded.outcomes).toEqual(inline.outcomes);
    expect(threaded).toEqual(inline);
    expect(inline.outcomes).toContain('SQLITE_CONSTRAINT_UNIQUE');
  });

  it('small batches on the loop and large ones on the thread, taking turns: the same tables and events as inline', async () => {
    const inline = await runWorkload();
    const onLoop = vi.spyOn(JournalWriter.prototype, 'commit');
    const mixed = await runWorkload({ writerThread: true, threadBatchEventsMin: 6 });
    // Both writers sealed events of this run, each extending the tree where the other left it (the verifier agrees).
    const loopEvents = onLoop.mock.calls.flatMap(([batch]) => batch.events).length;
    expect(loopEvents).toBeGreaterThan(mixed.recovered);
    expect(loopEvents).toBeLessThan(mixed.events.length / 2);
    expect(mixed).toEqual(inline);
  });

  it('on demand, started by load and ended when idle, again and again: the same tables and events as inline', async () => {
    const inline = await runWorkload();
    const launched = vi.spyOn(WriterThread, 'launch');
    const onDemand = await runWorkload({ writerThread: 'on-demand', threadBatchEventsMin: 1, writerThreadIdleMs: 1 });
    expect(launched).toHaveBeenCalled();
    expect(onDemand).toEqual(inline);
  });
});

describe("the loop's committed tree head moves from the writer's ack, and the sealer starts from plain data", () => {
  afterEach(() => vi.restoreAllMocks());

  it('checkpoints sign the frontier each ack carried (a structured clone of it), over a sealer built from a clone of its start data', async () => {
    const acks: WriteAck[] = [];
    const commit = JournalWriter.prototype.commit;
    vi.spyOn(JournalWriter.prototype, 'commit').mockImplementation(function (this: JournalWriter, batch) {
      // What the loop hears is a copy: nothing it keeps may be the writer's own object.
      const ack = structuredClone(commit.call(this, batch));
      acks.push(ack);
      return ack;
    });
    const sealerStart = AuditWriter.prototype.sealerStart;
    vi.spyOn(AuditWriter.prototype, 'sealerStart').mockImplementation(function (this: AuditWriter) {
      return structuredClone(sealerStart.call(this));
    });
    const temp = await openTempJournal({ checkpointEveryEvents: 4, writerThread: false });
    try {
      for (const event of actionPaths.httpNoApproval('act_w_head').slice(0, 6)) await temp.journal.append(event);
      for (const event of actionPaths.httpNoApproval('act_w_head2').slice(0, 4)) await temp.journal.append(event);
      // This run's events open with the run key the loop kept, though the sealer sealed with its copy.
      expect([...temp.journal.events()].map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      const db = temp.reader();
      const checkpoints = db.prepare(`SELECT size, root, reason FROM checkpoints ORDER BY size`).all() as Array<{
        size: number;
        root: Uint8Array;
        reason: string;
      }>;
      expect(checkpoints.map(({ size, reason }) => ({ size, reason }))).toEqual([
        { size: 4, reason: 'interval' },
        { size: 8, reason: 'interval' },
      ]);
      for (const { size, root } of checkpoints) {
        const ack = acks.find((a) => a.treeSize === size);
        const frontier = ack === undefined ? undefined : decodeFrontier(ack.treeSize, ack.frontier);
        expect(frontier?.size).toBe(size);
        expect(new Uint8Array(root)).toEqual(new Uint8Array(frontierRoot(sha256, frontier!)));
      }
      const tree = db.prepare(`SELECT size, frontier FROM audit_tree`).get() as { size: number; frontier: Uint8Array };
      expect({ size: tree.size, frontier: new Uint8Array(tree.frontier) }).toEqual({
        size: acks.at(-1)?.treeSize,
        frontier: acks.at(-1)?.frontier,
      });
      expect(acks.at(-1)?.treeSize).toBe(10);
      // The shutdown checkpoint signs the last ack's head too, and the verifier finds every signature good.
      await temp.journal.close();
      expect(await verifyJournal({ dbPath: temp.path })).toMatchObject({ ok: true, events: 10, checkpoints: 3 });
    } finally {
      await temp.dispose();
    }
  });
});

describe('the audit writes outside a commit reach the JournalWriter as plain-data operations', () => {
  afterEach(() => vi.restoreAllMocks());

  it('keys, the run key sealed, checkpoints at interval, unlock, lock and shutdown, an anchor record and the run end: each one WriterOp, written as it crossed', async () => {
    const ops: WriterOp[] = [];
    const write = JournalWriter.prototype.write;
    vi.spyOn(JournalWriter.prototype, 'write').mockImplementation(function (this: JournalWriter, op) {
      const cloned = structuredClone(op);
      ops.push(cloned);
      return write.call(this, cloned);
    });
    const vault = await createMemoryVault('locked');
    const temp = await openTempJournal({ vault, checkpointEveryEvents: 4, writerThread: false });
    const t0 = temp.clock.nowMs();
    try {
      const events = actionPaths.httpApproved('act_w_ops_01');
      for (const event of events.slice(0, 3)) await temp.journal.append(event);
      temp.clock.advance(1_000);
      vault.unlock();
      for (const event of events.slice(3, 8)) await temp.journal.append(event);
      expect(
        temp.journal.recordAnchor({ counter: 1, head_seq: 4, key_id: 'key-w', written_at_ms: temp.clock.nowMs() }),
      ).toBe(true);
      temp.clock.advance(1_000);
      vault.lock('idle');
      for (const event of events.slice(8)) await temp.journal.append(event);
      vault.unlock();
      await temp.journal.append(actionPaths.httpApproved('act_w_ops_02')[0] as NewEvent);
      temp.clock.advance(1_000);
      await temp.journal.close();
      expect(ops.map((op) => op.kind)).toEqual([
        'auditKeys',
        'runKeySealed',
        'checkpoint',
        'checkpoint',
        'anchorRecorded',
        'checkpoint',
        'checkpoint',
        'checkpoint',
        'runEnded',
      ]);
      const run0 = {
        run: 0,
        started_at_ms: 0,
        sealed: 0,
        ended_at_ms: null,
        end_reason: 'plaintext rows written before schema 4',
      };
      expect(auditTables(temp.path)).toEqual({
        checkpoints: [
          { size: 3, at_ms: t0 + 1_000, reason: 'unlock', root: 32, signature: 64 },
          { size: 7, at_ms: t0 + 1_000, reason: 'interval', root: 32, signature: 64 },
          { size: 8, at_ms: t0 + 2_000, reason: 'lock', root: 32, signature: 64 },
          { size: 11, at_ms: t0 + 2_000, reason: 'unlock', root: 32, signature: 64 },
          { size: 12, at_ms: t0 + 3_000, reason: 'shutdown', root: 32, signature: 64 },
        ],
        audit_keys: [{ box_public: 32, sign_public: 32, box_wrapped: 1, sign_wrapped: 1, created_at_ms: t0 + 1_000 }],
        audit_runs: [run0, { run: 1, started_at_ms: t0, sealed: 1, ended_at_ms: t0 + 3_000, end_reason: 'closed' }],
        integrity_anchor: [{ counter: 1, head_seq: 4, key_id: 'key-w', written_at_ms: t0 + 1_000 }],
      });
      expect(await verifyJournal({ dbPath: temp.path })).toMatchObject({ ok: true, events: 12, checkpoints: 5 });
    } finally {
      await temp.dispose();
    }
  });

  it("the run's failed end after a failure is one too", async () => {
    const ops: WriterOp[] = [];
    const write = JournalWriter.prototype.write;
    vi.spyOn(JournalWriter.prototype, 'write').mockImplementation(function (this: JournalWriter, op) {
      ops.push(op);
      return write.call(this, structuredClone(op));
    });
    const temp = await openTempJournal({
      sealFault: { atSeq: 2, message: 'sealing failed (injected)' },
      writerThread: false,
    });
    try {
      const [first, second] = actionPaths.httpNoApproval('act_w_ops_failed');
      await temp.journal.append(first as NewEvent);
      await expect(temp.journal.append(second as NewEvent)).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
      expect(ops.at(-1)).toMatchObject({ kind: 'runEnded', reason: 'failed: INTERNAL' });
      const t0 = temp.clock.nowMs();
      expect(auditTables(temp.path).audit_runs).toContainEqual({
        run: 1,
        started_at_ms: t0,
        sealed: 1,
        ended_at_ms: t0,
        end_reason: 'failed: INTERNAL',
      });
    } finally {
      await temp.dispose();
    }
  });
});
