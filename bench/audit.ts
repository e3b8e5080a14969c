/**
 * Audit benchmark: what encryption + Merkle hashing cost per event, durable append throughput with
 * them (group commit, 64 concurrent appenders), and `audit verify` speed on a generated journal of
 * 1,000,000 events.
 *
 *   node --import tsx bench/audit.ts [events to generate, default 1000000] [parent dir]
 *
 * Not part of the test run. Bounded: each timed phase stops at its time or count limit; the
 * generator writes in transactions of `generateBatchRows` with synchronous=OFF (it is a fixture,
 * not the journal; the rows, tree and checkpoints are exactly what the journal writes).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import sodium from 'libsodium-wrappers-sumo';
import { verifyJournal } from '../broker/audit/verify-journal.js';
import type { NewEvent } from '../broker/contract/index.js';
import {
  appendLeaf,
  auditHeaderText,
  checkpointDomain,
  emptyFrontier,
  encodeAssociatedData,
  encodeCheckpointMessage,
  encodeFrontier,
  encodeLeaf,
  frontierRoot,
  leafHash,
} from '../broker/core/index.js';
import { encryptPayload, newRunKey, NoncePool, sealRunKey, sha256 } from '../broker/journal/event-cipher.js';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { createMemoryVault } from '../broker/testing/memory-vault.js';

const generateEvents = Number(process.argv[2] ?? 1_000_000);
const parentDir = process.argv[3] ?? tmpdir();
const sealMsMax = 3_000;
const sealEventsMax = 500_000;
const appendMsMax = 5_000;
const appendEventsMax = 200_000;
const appenders = 64;
const generateBatchRows = 20_000;
const checkpointEvery = 1_000;

/** A realistic event mix: every kind of the approved HTTP path, ~200–400 bytes of JSON each. */
const script = actionPaths.httpApproved('act_bench_000000');
function eventFor(i: number): NewEvent {
  const base = script[i % script.length] as NewEvent;
  return { ...base, action_id: `act_bench_${String(Math.floor(i / script.length)).padStart(6, '0')}` };
}

function rate(n: number, ms: number): string {
  return `${Math.round((n / ms) * 1000).toLocaleString('en-US')}`;
}

/** Phase 1: seal + leaf hash + frontier append, no SQLite: the crypto cost per event. */
function benchSeal(): { events: number; ms: number } {
  const key = newRunKey();
  const nonces = new NoncePool();
  let frontier = emptyFrontier;
  const start = performance.now();
  let n = 0;
  while (n < sealEventsMax && performance.now() - start < sealMsMax) {
    const e = eventFor(n);
    const header = Buffer.from(
      auditHeaderText({
        at_ms: 1,
        action_id: e.action_id,
        session_id: 'ses_bench',
        ticket: n,
        lane: 'lane-a',
        kind: e.kind,
        run: 1,
      }),
      'utf8',
    );
    const nonce = nonces.next();
    const ct = encryptPayload(
      key,
      nonce,
      encodeAssociatedData(n + 1, header),
      Buffer.from(JSON.stringify({ payload: e.payload }), 'utf8'),
    );
    frontier = appendLeaf(sha256, frontier, leafHash(sha256, encodeLeaf(n + 1, header, nonce, ct)));
    n += 1;
  }
  return { events: n, ms: performance.now() - start };
}

/** Phase 2: durable appends through the real journal (group commit, vault unlocked, checkpoints on). */
async function benchAppend(): Promise<{ events: number; ms: number; commits: number }> {
  const dir = mkdtempSync(join(parentDir, 'postern-bench-audit-'));
  try {
    const journal = await Journal.open({ dataDir: dir, clock: systemClock, vault: await createMemoryVault() });
    let next = 0;
    const start = performance.now();
    const worker = async (): Promise<void> => {
      while (next < appendEventsMax && performance.now() - start < appendMsMax) {
        const first = next;
        next += script.length;
        // One action's whole path as one unit: every event valid for the projection.
        await journal.appendBatch(Array.from({ length: script.length }, (_, k) => eventFor(first + k)));
      }
    };
    await Promise.all(Array.from({ length: appenders }, worker));
    const ms = performance.now() - start;
    const { events, commits } = journal.stats();
    await journal.close();
    return { events, ms, commits };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Phase 3: a journal of `count` events written directly in big transactions, then verified. */
async function generate(dbPath: string, count: number): Promise<number> {
  const dir = join(dbPath, '..');
  const journal = await Journal.open({ dataDir: dir, clock: systemClock });
  await journal.close();
  const db = new Database(dbPath);
  db.pragma('synchronous = OFF');
  const box = sodium.crypto_box_keypair();
  const sign = sodium.crypto_sign_keypair();
  db.prepare(
    `INSERT INTO audit_keys (id, box_public, sign_public, box_secret_wrapped, sign_secret_wrapped, created_at_ms) VALUES (1, ?, ?, x'00', x'00', 0)`,
  ).run(box.publicKey, sign.publicKey);
  const key = newRunKey();
  db.prepare(`INSERT INTO audit_runs (run, started_at_ms, sealed_key) VALUES (2, 0, ?)`).run(
    sealRunKey(key, box.publicKey),
  );
  const insert = db.prepare(
    `INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, nonce, ciphertext, leaf_hash) VALUES (?, ?, ?, 'ses_bench', ?, 'lane-a', ?, 2, ?, ?, ?)`,
  );
  const checkpoint = db.prepare(
    `INSERT INTO checkpoints (size, root, at_ms, reason, signature) VALUES (?, ?, ?, 'interval', ?)`,
  );
  const domain = Buffer.from(checkpointDomain, 'utf8');
  const nonces = new NoncePool(4_096);
  let frontier = emptyFrontier;
  const start = performance.now();
  for (let from = 0; from < count; from += generateBatchRows) {
    db.transaction(() => {
      for (let i = from; i < Math.min(count, from + generateBatchRows); i += 1) {
        const seq = i + 1;
        const e = eventFor(i);
        const ticket = Math.floor(i / script.length) + 1;
        const header = Buffer.from(
          auditHeaderText({
            at_ms: seq,
            action_id: e.action_id,
            session_id: 'ses_bench',
            ticket,
            lane: 'lane-a',
            kind: e.kind,
            run: 2,
          }),
          'utf8',
        );
        const nonce = nonces.next();
        const ct = encryptPayload(
          key,
          nonce,
          encodeAssociatedData(seq, header),
          Buffer.from(JSON.stringify({ payload: e.payload }), 'utf8'),
        );
        const leaf = leafHash(sha256, encodeLeaf(seq, header, nonce, ct));
        frontier = appendLeaf(sha256, frontier, leaf);
        insert.run(seq, seq, e.action_id, ticket, e.kind, nonce, ct, leaf);
        if (seq % checkpointEvery === 0) {
          const root = frontierRoot(sha256, frontier);
          checkpoint.run(
            seq,
            root,
            seq,
            sodium.crypto_sign_detached(encodeCheckpointMessage(domain, seq, root, seq), sign.privateKey),
          );
        }
      }
    })();
  }
  db.prepare(`UPDATE audit_tree SET size = ?, frontier = ?`).run(frontier.size, encodeFrontier(frontier));
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return performance.now() - start;
}

async function main(): Promise<void> {
  await sodium.ready;
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(`# audit bench — ${cpus().length} × ${cpu}, Node ${process.version}`);
  const seal = benchSeal();
  const append = await benchAppend();
  const dir = mkdtempSync(join(parentDir, 'postern-bench-audit-'));
  try {
    const dbPath = join(dir, 'journal.sqlite');
    const genMs = await generate(dbPath, generateEvents);
    const start = performance.now();
    const report = await verifyJournal({ dbPath });
    const verifyMs = performance.now() - start;
    if (!report.ok) throw new Error(`generated journal failed to verify: ${report.code} ${report.message}`);
    console.log('| phase | events | time | events/s |');
    console.log('| --- | ---: | ---: | ---: |');
    console.log(
      `| seal + hash only (XChaCha20-Poly1305, SHA-256 leaf + frontier; no SQLite) | ${seal.events} | ${(seal.ms / 1000).toFixed(2)} s | ${rate(seal.events, seal.ms)} |`,
    );
    console.log(
      `| durable appends through the journal (${appenders} appenders, ${script.length}-event units, group commit, synchronous=FULL, checkpoints every 1000) | ${append.events} | ${(append.ms / 1000).toFixed(2)} s | ${rate(append.events, append.ms)} (${append.commits} commits) |`,
    );
    console.log(
      `| generate (batch inserts of ${generateBatchRows}, synchronous=OFF, ${Math.floor(generateEvents / checkpointEvery)} signed checkpoints) | ${generateEvents} | ${(genMs / 1000).toFixed(1)} s | ${rate(generateEvents, genMs)} |`,
    );
    console.log(
      `| audit verify (read-only, every leaf + tree + ${report.checkpoints} signatures) | ${report.events} | ${(verifyMs / 1000).toFixed(1)} s | ${rate(report.events, verifyMs)} |`,
    );
    console.log(`\njournal file: ${(statSync(dbPath).size / 2 ** 20).toFixed(0)} MiB for ${generateEvents} events`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
