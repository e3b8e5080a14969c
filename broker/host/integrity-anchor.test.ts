import { generateKeyPairSync, sign } from 'node:crypto';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cpSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentRefusalSchema, configSubjectId, type AnchorFailureCode } from '../contract/index.js';
import { appendLeaf, emptyFrontier, encodeFrontier } from '../core/index.js';
import { Journal, journalFileName } from '../journal/index.js';
import type { OperatorActor } from '../ports/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createMemoryVault, type MemoryVault } from '../testing/memory-vault.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { sha256 } from '../journal/event-cipher.js';
import {
  anchorFileOf,
  anchorMessage,
  judgeAnchor,
  keyIdOf,
  integrityAnchorGate,
  stateDigestOf,
  type AnchorBody,
  type IntegrityAnchor,
  type JournalAnchorView,
} from './integrity-anchor.js';

const person: OperatorActor = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' };
let dirs: TempDir[];
let anchors: TempDir;
let env: NodeJS.ProcessEnv;
let vault: MemoryVault;
const clock = new FakeClock();
beforeEach(async () => {
  dirs = [];
  anchors = createTempDir('postern-anchors-');
  env = { POSTERN_ANCHOR_DIR: anchors.path };
  vault = await createMemoryVault();
});
afterEach(() => {
  for (const dir of [...dirs, anchors]) dir.remove();
});

function dataDir(): string {
  const dir = createTempDir('postern-anchor-data-');
  dirs.push(dir);
  return dir.path;
}

interface Run {
  journal: Journal;
  anchor: IntegrityAnchor;
}

/**
 * The runtime's order: the journal opens (the anchor judged after migrations, before recovery), the anchor serves that
 * verdict, then the vault attaches (its unlock signs).
 */
async function start(
  dir: string,
  withVault: MemoryVault | null = vault,
  more: { gate?: DiskSyncGate; logger?: Logger } = {},
): Promise<Run> {
  const anchorGate = integrityAnchorGate({
    dataDir: dir,
    clock,
    env,
    ...(more.logger === undefined ? {} : { logger: more.logger }),
  });
  const journal = await Journal.open({
    dataDir: dir,
    clock,
    judgeBeforeRecovery: anchorGate.judgeBeforeRecovery,
    ...(more.gate === undefined ? {} : { beforeSync: more.gate.beforeSync }),
  });
  const anchor = anchorGate.open(journal);
  if (withVault !== null) journal.attachVault(withVault);
  return { journal, anchor };
}

let digestCounter = 0;
async function appendEvents(journal: Journal, n: number): Promise<void> {
  for (let i = 0; i < n; i += 1) {
    digestCounter += 1;
    const digest = `sha256:${digestCounter.toString(16).padStart(64, '0')}`;
    await journal.appendConfig({
      kind: 'CONFIG_APPLIED',
      action_id: configSubjectId(digest),
      payload: { digest, by: 'person:ann', how: 'accepted', restart_needed_for: [] },
    });
  }
}

/** Appends `n` events at once without waiting for them: with the disk's sync held they commit but do not settle. */
function fireEvents(journal: Journal, n: number): Promise<unknown> {
  const fired: Array<Promise<unknown>> = [];
  for (let i = 0; i < n; i += 1) fired.push(appendEvents(journal, 1));
  return Promise.all(fired);
}

/** Resolves once the journal committed through `seq` (its change feed says so), durable or not. */
function committedThrough(journal: Journal, seq: number): Promise<void> {
  return new Promise((resolve) => {
    if (journal.stats().last_seq >= seq) return resolve();
    const stop = journal.onCommit((commit) => {
      if (commit.last_seq < seq) return;
      stop();
      resolve();
    });
  });
}

/** A first run that appends `n` events and stops: its shutdown checkpoint writes anchor 1. */
async function firstRun(dir: string, n = 3): Promise<void> {
  const run = await start(dir);
  expect(run.anchor.report()).toMatchObject({ state: 'first_use', code: null, found: null });
  await appendEvents(run.journal, n);
  await run.journal.close();
}

/**
 * A data directory put back to the copy taken after its first run, once a second run had appended `more` events (and
 * moved the anchor past the copy): the rollback the anchor exists to catch. Returns the directory.
 */
async function restoredEarlierCopy(more: number): Promise<string> {
  const dir = dataDir();
  await firstRun(dir);
  const copy = dataDir();
  cpSync(dir, copy, { recursive: true });
  const second = await start(dir);
  await appendEvents(second.journal, more);
  await second.journal.close();
  // The copy goes back where the data directory was (same path, so the same anchor).
  rmSync(dir, { recursive: true });
  cpSync(copy, dir, { recursive: true });
  return dir;
}

function anchorJson(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(anchorFileOf(dir, env), 'utf8')) as Record<string, unknown>;
}

async function expectQuarantined(dir: string, code: AnchorFailureCode): Promise<Run> {
  const run = await start(dir);
  expect(run.anchor.report()).toMatchObject({ state: 'quarantined', code });
  expect(run.anchor.quarantined()).toBe(true);
  return run;
}

describe("when the anchor is judged: inside the journal's open, before recovery", () => {
  it('serving a journal the gate never judged (opened without its hook, or another one) is refused', async () => {
    const dir = dataDir();
    const gate = integrityAnchorGate({ dataDir: dir, clock, env });
    const never = await Journal.open({ dataDir: dir, clock });
    expect(() => gate.open(never)).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    await never.close();
    const judged = await Journal.open({ dataDir: dir, clock, judgeBeforeRecovery: gate.judgeBeforeRecovery });
    await judged.close();
    // The gate judged a journal, but not this one (opened after, without the hook): its recovery ran unjudged.
    const other = await Journal.open({ dataDir: dir, clock });
    expect(() => gate.open(other)).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    await other.close();
    const again = await Journal.open({ dataDir: dir, clock, judgeBeforeRecovery: gate.judgeBeforeRecovery });
    expect(gate.open(again).report()).toMatchObject({ state: 'first_use' });
    await again.close();
  });

  it('an action left open in a quarantined journal (here ANCHOR_MISSING) is recovered unknown, not not_attempted', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const second = await start(dir);
    const id = 'act_quarantine_0001';
    const script = actionPaths.httpApproved(id);
    for (const event of script.slice(
      0,
      script.findIndex((e) => e.kind === 'DISPATCH_STARTED'),
    ))
      await second.journal.append(event);
    await second.journal.close();
    rmSync(anchorFileOf(dir, env));

    const run = await expectQuarantined(dir, 'ANCHOR_MISSING');
    expect(run.journal.stats().recovered_at_open).toBe(1);
    expect(run.journal.getAction(id)).toMatchObject({
      dispatch_seq: null,
      outcome: 'unknown',
      effect: 'unknown_effect',
      outcome_basis: 'broker_restart_journal_quarantined',
    });
    await run.journal.close();
  });
});

describe('when the journal and its anchor agree', () => {
  it('writes anchor 1 at the first checkpoint, records it in the journal, and the next start is ok', async () => {
    const dir = dataDir();
    await firstRun(dir);
    expect(anchorJson(dir)).toMatchObject({ version: 1, counter: 1, head_seq: 3 });
    const run = await start(dir);
    expect(run.anchor.report()).toMatchObject({
      state: 'ok',
      code: null,
      found: { counter: 1, head_seq: 3 },
      journal: { events: 3, recorded_counter: 1 },
    });
    expect(run.anchor.agentRefusal('http_request')).toBeUndefined();
    await appendEvents(run.journal, 2);
    await run.journal.close();
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 5 });
  });

  it('a journal that was never unlocked writes no anchor and stays first use', async () => {
    const dir = dataDir();
    const run = await start(dir, null);
    await appendEvents(run.journal, 2);
    await run.journal.close();
    const again = await start(dir, null);
    expect(again.anchor.report()).toMatchObject({ state: 'first_use' });
    await again.journal.close();
  });
});

describe('when the start finds the journal behind or beside its anchor', () => {
  it('a whole data directory restored from an earlier copy is ANCHOR_ROLLBACK, refuses action tools, and writes no anchor', async () => {
    const dir = await restoredEarlierCopy(4);

    const run = await expectQuarantined(dir, 'ANCHOR_ROLLBACK');
    expect(run.anchor.report()).toMatchObject({ found: { counter: 2, head_seq: 7 }, journal: { events: 3 } });
    const refused = run.anchor.agentRefusal('http_request');
    expect(refused).toMatchObject({ isError: true, structured: { error: { code: 'JOURNAL_QUARANTINED' } } });
    expect(refused?.structured).toMatchObject({ error: { outcome: 'not_attempted' } });
    // Built without a parse in production (issue 18): the contract's schema is checked here.
    expect(agentRefusalSchema.parse(refused?.structured)).toEqual(refused?.structured);
    for (const tool of ['ssh_exec', 'mcp_tool', 'request_credential'] as const)
      expect(run.anchor.agentRefusal(tool)).toBeDefined();
    // Reading what exists stays answered, so an agent can say why it cannot act.
    expect(run.anchor.agentRefusal('action_status')).toBeUndefined();
    // Checkpoints while quarantined must not overwrite the anchor: that would adopt the rolled-back history silently.
    await appendEvents(run.journal, 1);
    await run.journal.close();
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 7 });
    const still = await expectQuarantined(dir, 'ANCHOR_ROLLBACK');
    await still.journal.close();
  });

  it('an anchor restored from an earlier copy (older than the journal recorded) is ANCHOR_ROLLBACK', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const old = readFileSync(anchorFileOf(dir, env));
    const second = await start(dir);
    await appendEvents(second.journal, 1);
    await second.journal.close();
    writeFileSync(anchorFileOf(dir, env), old);
    const run = await expectQuarantined(dir, 'ANCHOR_ROLLBACK');
    expect(run.anchor.report().detail).toContain('older than the journal recorded');
    await run.journal.close();
  });

  it('an anchor with an edited counter (or head, or another data directory) is ANCHOR_FORGED', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const original = readFileSync(anchorFileOf(dir, env), 'utf8');
    for (const edit of [{ counter: 9 }, { head_seq: 2 }, { data_dir: 'ab'.repeat(32) }, { signature: 'AAAA' }]) {
      writeFileSync(anchorFileOf(dir, env), JSON.stringify({ ...JSON.parse(original), ...edit }));
      const run = await expectQuarantined(dir, 'ANCHOR_FORGED');
      await run.journal.close();
    }
    writeFileSync(anchorFileOf(dir, env), '{"version": 1, "counter": ');
    const run = await expectQuarantined(dir, 'ANCHOR_FORGED');
    expect(run.anchor.report().detail).toContain('not JSON');
    await run.journal.close();
  });

  it('a deleted anchor, once the journal recorded one, is ANCHOR_MISSING', async () => {
    const dir = dataDir();
    await firstRun(dir);
    rmSync(anchorFileOf(dir, env));
    const run = await expectQuarantined(dir, 'ANCHOR_MISSING');
    await run.journal.close();
  });

  it('events deleted after the anchor named them (tree state fixed up to match) is ANCHOR_TAIL_MISSING', async () => {
    const dir = dataDir();
    await firstRun(dir, 5);
    truncateEvents(path.join(dir, journalFileName), 3);
    const run = await expectQuarantined(dir, 'ANCHOR_TAIL_MISSING');
    expect(run.anchor.report()).toMatchObject({ found: { head_seq: 5 }, journal: { events: 3, recorded_counter: 1 } });
    await run.journal.close();
  });

  it('a rewritten leaf under the anchored head (head not at the tree size) is ANCHOR_TAIL_MISSING', async () => {
    const dir = dataDir();
    await firstRun(dir, 4);
    // More events appended while locked: no checkpoint, so the anchor stays at 4 and the tree grows past it.
    const locked = await start(dir, null);
    await appendEvents(locked.journal, 2);
    await locked.journal.close();
    const db = new Database(path.join(dir, journalFileName));
    // The append-only triggers are the file's own: whoever can write the file can drop them.
    db.exec('DROP TRIGGER events_no_update');
    db.prepare(`UPDATE events SET leaf_hash = ? WHERE seq = 2`).run(Buffer.alloc(32, 7));
    db.close();
    const run = await expectQuarantined(dir, 'ANCHOR_TAIL_MISSING');
    await run.journal.close();
  });
});

/**
 * The anchor's path is the agent's user's to replace. Before the fix a FIFO there blocked the open forever (inside the
 * checkpoint's transaction, on the event loop); a watchdog opens the FIFO's writer end after a few seconds, again and
 * again, so that an unfixed reader is released (and the elapsed time fails the test) instead of hanging the run.
 */
describe('when the anchor path is a FIFO, a link to /dev/zero, or a huge file', () => {
  const watchdogs: ChildProcess[] = [];
  afterEach(() => {
    for (const child of watchdogs.splice(0)) child.kill('SIGKILL');
  });
  function fifoAt(file: string): void {
    rmSync(file, { force: true });
    execFileSync('mkfifo', [file]);
    // Each writer open releases one blocked reader; the loop ends once the FIFO was renamed over.
    const release = 'sleep 3; while [ -p "$1" ]; do : > "$1"; done';
    watchdogs.push(spawn('sh', ['-c', release, 'sh', file], { stdio: 'ignore' }));
  }

  it('the start answers ANCHOR_FORGED at once for each, reading at most the bound', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const file = anchorFileOf(dir, env);
    const plants: Array<[string, () => void]> = [
      ['it is not a regular file', () => fifoAt(file)],
      ['symbolic link', () => (rmSync(file), symlinkSync('/dev/zero', file))],
      ['larger than', () => (rmSync(file), writeFileSync(file, Buffer.alloc(10 * 1024 * 1024, 0x20)))],
    ];
    for (const [why, plant] of plants) {
      plant();
      const began = performance.now();
      const run = await expectQuarantined(dir, 'ANCHOR_FORGED');
      expect(run.anchor.report().detail).toContain(why);
      expect(performance.now() - began).toBeLessThan(2_000);
      await run.journal.close();
    }
  }, 20_000);

  it('a FIFO planted after the start does not block the checkpoint: the journal commits and the anchor is replaced', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const run = await start(dir);
    expect(run.anchor.report()).toMatchObject({ state: 'ok' });
    fifoAt(anchorFileOf(dir, env));
    const began = performance.now();
    expect(run.anchor.report()).toMatchObject({ state: 'ok', found: { counter: 1 } });
    await appendEvents(run.journal, 2);
    await run.journal.close();
    expect(performance.now() - began).toBeLessThan(2_000);
    expect(lstatSync(anchorFileOf(dir, env)).isFile()).toBe(true);
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 5 });
    const next = await start(dir);
    expect(next.anchor.report()).toMatchObject({ state: 'ok', journal: { events: 5, recorded_counter: 2 } });
    await next.journal.close();
  }, 20_000);
});

describe('when the anchor is written: after the sync that makes its head durable, off the event loop', () => {
  it('a checkpoint committed while the WAL sync is held writes no anchor naming its head until a later sync returns', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const gate = new DiskSyncGate();
    const run = await start(dir, vault, { gate });
    await appendEvents(run.journal, 2);
    expect(run.journal.durableSeq()).toBe(5);
    // The events are durable already: only a sync that begins after the checkpoint's COMMIT covers the checkpoint.
    gate.hold();
    const asked = gate.nextRequest();
    vault.lock();
    // Whichever comes first: the anchor's request for a sync, or (wrongly) the anchor itself.
    await Promise.race([asked, run.anchor.settled()]);
    expect(gate.waiting()).toBe(1);
    expect(anchorJson(dir)).toMatchObject({ counter: 1, head_seq: 3 });
    expect(run.journal.anchorState().recorded?.counter).toBe(1);
    gate.release();
    await run.anchor.settled();
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 5 });
    expect(run.journal.anchorState().recorded?.counter).toBe(2);
    await run.journal.close();
  });

  it("the checkpoint's transaction returns before the file changes; the journal records it only after it landed", async () => {
    const dir = dataDir();
    await firstRun(dir);
    const run = await start(dir);
    await appendEvents(run.journal, 2);
    const before = readFileSync(anchorFileOf(dir, env), 'utf8');
    // vault.lock signs the lock checkpoint synchronously: the old code wrote and fsynced the file inside that call.
    vault.lock();
    expect(readFileSync(anchorFileOf(dir, env), 'utf8')).toBe(before);
    expect(run.journal.anchorState().recorded?.counter).toBe(1);
    await run.anchor.settled();
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 5 });
    expect(run.journal.anchorState().recorded?.counter).toBe(2);
    await run.journal.close();
  });

  it('close waits for the anchor in flight and the shutdown anchor after it: the newest lands last, both recorded', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const gate = new DiskSyncGate();
    const run = await start(dir, vault, { gate });
    gate.hold();
    const first = fireEvents(run.journal, 2);
    await committedThrough(run.journal, 5);
    vault.lock(); // anchor 2 at head 5, waiting for the held sync
    vault.unlock();
    const second = fireEvents(run.journal, 2);
    await committedThrough(run.journal, 7);
    let closed = false;
    const closing = run.journal.close().then(() => (closed = true)); // the shutdown checkpoint signs anchor 3 at head 7
    await Promise.resolve();
    expect(closed).toBe(false);
    expect(anchorJson(dir)).toMatchObject({ counter: 1, head_seq: 3 });
    gate.release();
    await Promise.all([closing, first, second]);
    expect(anchorJson(dir)).toMatchObject({ counter: 3, head_seq: 7 });
    const next = await start(dir);
    expect(next.anchor.report()).toMatchObject({ state: 'ok', journal: { events: 7, recorded_counter: 3 } });
    await next.journal.close();
  });

  it('a failed write is logged, the journal goes on, and the next checkpoint writes one past the record', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const { logger, lines } = createCapturedLogger();
    const run = await start(dir, vault, { logger });
    await appendEvents(run.journal, 2);
    // The anchors' directory becomes a regular file: every step of the write fails.
    rmSync(anchors.path, { recursive: true });
    writeFileSync(anchors.path, 'not a directory');
    vault.lock();
    await run.anchor.settled();
    expect(lines.join('')).toContain('the integrity anchor could not be written');
    expect(run.journal.stats().state).toBe('open');
    expect(run.journal.anchorState().recorded?.counter).toBe(1);
    rmSync(anchors.path);
    mkdirSync(anchors.path);
    vault.unlock();
    await appendEvents(run.journal, 1);
    vault.lock();
    await run.anchor.settled();
    expect(anchorJson(dir)).toMatchObject({ counter: 2, head_seq: 6 });
    expect(run.journal.anchorState().recorded?.counter).toBe(2);
    await run.journal.close();
  });
});

describe('when a crash fell between the anchor file landing and the journal recording it', () => {
  /** What that crash leaves: the journal's record one counter behind the file (as the journal had it before). */
  function unrecordLast(dir: string): void {
    const db = new Database(path.join(dir, journalFileName));
    db.prepare(`UPDATE integrity_anchor SET counter = counter - 1 WHERE id = 1`).run();
    db.close();
  }

  it('the file one past the record, its head in the journal, is ok, and the start records it', async () => {
    const dir = dataDir();
    await firstRun(dir);
    const second = await start(dir);
    await appendEvents(second.journal, 2);
    await second.journal.close();
    unrecordLast(dir);
    const run = await start(dir);
    expect(run.anchor.report()).toMatchObject({
      state: 'ok',
      found: { counter: 2, head_seq: 5 },
      journal: { events: 5, recorded_counter: 2 },
    });
    await appendEvents(run.journal, 1);
    await run.journal.close();
    // The same crash again is still one past the record, not two.
    unrecordLast(dir);
    expect(anchorJson(dir)).toMatchObject({ counter: 3, head_seq: 6 });
    const again = await start(dir);
    expect(again.anchor.report()).toMatchObject({ state: 'ok', journal: { recorded_counter: 3 } });
    await again.journal.close();
  });

  it('the file one past the record but naming a head the journal lacks (a rolled-back data directory) is ANCHOR_ROLLBACK', async () => {
    const dir = await restoredEarlierCopy(2);
    const run = await expectQuarantined(dir, 'ANCHOR_ROLLBACK');
    expect(run.anchor.report()).toMatchObject({ found: { counter: 2 }, journal: { recorded_counter: 1, events: 3 } });
    await run.journal.close();
  });
});

describe('when a person re-adopts a quarantined journal', () => {
  async function rolledBack(): Promise<{ dir: string; run: Run }> {
    const dir = await restoredEarlierCopy(2);
    return { dir, run: await expectQuarantined(dir, 'ANCHOR_ROLLBACK') };
  }

  it('journals the decision, signs anchor 3 over the journal as it is, serves agents again, and the next start is ok', async () => {
    const { dir, run } = await rolledBack();
    const report = await run.anchor.readopt('ANCHOR_ROLLBACK', person);
    expect(report).toMatchObject({
      state: 'ok',
      code: null,
      readopted: { by: 'ann', code: 'ANCHOR_ROLLBACK' },
      found: { counter: 3, head_seq: 4 },
    });
    expect(run.anchor.agentRefusal('http_request')).toBeUndefined();
    const [event] = run.journal.subjectEvents('cfg_a4c40000000000a4');
    expect(event).toMatchObject({
      kind: 'INTEGRITY_READOPTED',
      payload: { code: 'ANCHOR_ROLLBACK', anchor_counter: 2, anchor_head_seq: 5, journal_last_seq: 3 },
    });
    await run.journal.close();
    const next = await start(dir);
    expect(next.anchor.report()).toMatchObject({ state: 'ok', journal: { recorded_counter: 3 } });
    await next.journal.close();
  });

  it('refuses a process actor, a code other than the one found, and a locked vault — and stays quarantined', async () => {
    const { run } = await rolledBack();
    const process: OperatorActor = { kind: 'process', id: '/usr/bin/node pid 7' };
    await expect(run.anchor.readopt('ANCHOR_ROLLBACK', process)).rejects.toMatchObject({
      code: 'OPERATOR_PROOF_REQUIRED',
    });
    await expect(run.anchor.readopt('ANCHOR_FORGED', person)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'code',
    });
    vault.lock();
    await expect(run.anchor.readopt('ANCHOR_ROLLBACK', person)).rejects.toMatchObject({ code: 'VAULT_LOCKED' });
    expect(run.anchor.report()).toMatchObject({ state: 'quarantined', code: 'ANCHOR_ROLLBACK', readopted: null });
    await run.journal.close();
  });
});

/** What an attacker with the file does to hide a tail: drop the rows and make the tree state agree with the rest. */
function truncateEvents(file: string, keep: number): void {
  const db = new Database(file);
  try {
    db.exec('DROP TRIGGER events_no_delete');
    db.prepare(`DELETE FROM events WHERE seq > ?`).run(keep);
    const leaves = db.prepare(`SELECT leaf_hash FROM events ORDER BY seq`).all() as Array<{ leaf_hash: Buffer }>;
    let frontier = emptyFrontier;
    for (const { leaf_hash } of leaves) frontier = appendLeaf(sha256, frontier, leaf_hash);
    db.prepare(`UPDATE audit_tree SET size = ?, frontier = ? WHERE id = 1`).run(keep, encodeFrontier(frontier));
  } finally {
    db.close();
  }
}

describe('judgeAnchor, check by check (no I/O)', () => {
  const keys = generateKeyPairSync('ed25519');
  const signPublic = Buffer.from(keys.publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
  const boxPublic = Buffer.alloc(32, 3);
  const root = Buffer.alloc(32, 9);
  const body: AnchorBody = {
    version: 1,
    data_dir: 'aa'.repeat(32),
    counter: 4,
    head_seq: 10,
    head_hash: root.toString('hex'),
    state_digest: stateDigestOf(signPublic, boxPublic),
    key_id: keyIdOf(signPublic),
    written_at_ms: 1,
  };
  const signed = (b: AnchorBody) => ({
    kind: 'read' as const,
    anchor: { ...b, signature: sign(null, anchorMessage(b), keys.privateKey).toString('base64') },
  });
  const journal: JournalAnchorView = {
    events: 12,
    last_seq: 12,
    sign_public: signPublic,
    box_public: boxPublic,
    recorded: { counter: 4, head_seq: 10, key_id: body.key_id, written_at_ms: 1 },
    root_at_head: root,
  };
  const cases: Array<[string, Parameters<typeof judgeAnchor>[0], Partial<JournalAnchorView>, string]> = [
    ['the anchor and the journal agree', signed(body), {}, 'ok'],
    [
      'the file landed but the journal had not recorded it yet (a crash between)',
      signed({ ...body, counter: 5 }),
      {},
      'ok',
    ],
    ['no anchor and none recorded: first use', { kind: 'absent' }, { recorded: undefined }, 'first_use'],
    ['no anchor but one recorded', { kind: 'absent' }, {}, 'ANCHOR_MISSING'],
    [
      'the journal lost its audit keys',
      signed(body),
      { sign_public: undefined, box_public: undefined },
      'ANCHOR_ROLLBACK',
    ],
    ['another key signed it (another journal)', signed(body), { sign_public: Buffer.alloc(32, 1) }, 'ANCHOR_FORGED'],
    ['the box key was swapped', signed(body), { box_public: Buffer.alloc(32, 4) }, 'ANCHOR_STATE_MISMATCH'],
    ['the journal never recorded any anchor', signed(body), { recorded: undefined }, 'ANCHOR_ROLLBACK'],
    ['the anchor is two ahead of the record, head present', signed({ ...body, counter: 6 }), {}, 'ANCHOR_ROLLBACK'],
    ['the tree head differs', signed(body), { root_at_head: Buffer.alloc(32, 8) }, 'ANCHOR_TAIL_MISSING'],
  ];
  it.each(cases)('when %s', (_, read, facts, expected) => {
    const verdict = judgeAnchor(read, body.data_dir, { ...journal, ...facts });
    expect(verdict.state === 'quarantined' ? verdict.code : verdict.state).toBe(expected);
  });
});
