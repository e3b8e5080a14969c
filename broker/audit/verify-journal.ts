import { hash } from 'node:crypto';
import type Database from 'better-sqlite3';
import sodium from 'libsodium-wrappers-sumo';
// The two core modules the verifier needs, not the core's index: `postern audit verify` loads neither the contract's
// schemas nor zod (issue 18's cold start; tests/cli-bundle.test.ts).
import { auditHeaderText, checkpointDomain, encodeCheckpointMessage, encodeLeaf } from '../core/audit-record.js';
import {
  appendLeaf,
  decodeFrontier,
  emptyFrontier,
  frontierRoot,
  leafHash,
  type Hash,
  type MerkleFrontier,
} from '../core/merkle-tree.js';
import type { Checkpoint, TrustedCheckpoint } from './checkpoint-file.js';
import { VerifyFailure, type VerifyCode } from './verify-codes.js';
import { openDatabase } from '../ports/open-database.js';
import { readPrivately } from '../ports/private-snapshot.js';
import {
  runVerifyJobs,
  verifyCacheKiB,
  type VerifyJob,
  type VerifyJobResult,
  type VerifyWorkerBounds,
} from './verify-pool.js';

/** The schema that introduced the audit log, and the newest this verifier knows. */
export const auditSchemaVersion = 4;
// 6 (idempotency_keys) adds a current-state table only, 7 (results.purged_at_ms) a column of the
// result store, 9 seals the result store (and may add an audit_runs row with no events), 10 adds the
// action list's columns to the current-state table: the events, tree and checkpoints are unchanged.
// 11 adds status counters (current-state tables only). 12 adds integrity_anchor, the counter of the last anchor file
// written (broker/host/integrity-anchor.ts): a current-state row, not part of the log. 13 adds the sealed SSH
// recordings (broker/journal/recording-store.ts), beside the result store: not part of the log either. 14 drops the
// attempts and tickets tables, projections nothing read: current state only. 15 re-derives actions.resolved_at_ms for
// unknowns a quarantined journal's recovery recorded before dispatch (they block their lane): current state only. 16
// recodes attested rejections stored as REMOTE_REJECTED to ATTESTED_REJECTED (actions rows, counters): current state.
// 17 adds session_counters, sessions.list's per-session figures: current state only.
// 18 adds sessions_by_first_seq, an index of the current-state sessions table only.
// 19 adds recordings.alive_at_ms, an open recording's last known moment alive (the purge's clock for it): beside the
// log, like 13.
// 20 rebuilds actions_list_open (actions list --open also keeps a recorded unknown its lane waits on): an index of the
// current-state actions table only.
// 21 rebuilds actions_list_by_outcome partial on settled rows (actions list --outcome means settled with it): an index
// of the current-state actions table only.
// 22 rebuilds the rate's outcome_minutes with in_flight (a running action is counted once settled): current state
// only.
// 23 adds idempotency_keys_by_expiry, an index of the current-state idempotency_keys table only.
// 24 adds events_dispatch_marks, a partial index of the events' plaintext headers: no row changes.
// 25 adds the events' outcome header column, part of the leaf where not null (outcomeCell; older rows' is null, their
// leaves unchanged), and events_outcome_marks, a partial index of it.
export const auditSchemaVersionMax = 25;
/** Hostile-input bounds per cell (the journal writes far less). */
const ciphertextBytesMax = 1024 * 1024;
const textCellCharsMax = 4096;
const nonceBytes = 24;
const hashBytes = 32;
const signatureBytes = 64;
const publicKeyBytes = 32;
/** More checkpoints than this is not a journal (one per 1,000 events is the default policy). */
const checkpointsMax = 10_000_000;
/** How often (rows) the verifier reports progress; the CLI throttles further by time. */
export const verifyProgressEveryRows = 16_384;
/** Below this many rows the serial loop is done before worker threads would have started. */
export const parallelRowsMin = 50_000;
/** Rows per worker job, a power of two so each full job is one perfect subtree of the Merkle tree. */
export const chunkRowsLog2 = 16;
/** Signatures per worker job (~0.4 ms each in libsodium's wasm). */
const signaturesPerJob = 256;
/** The serial steps hand the event loop back this often, so a daemon running them keeps answering. */
const yieldEveryRows = 2_048;
const bounds: VerifyWorkerBounds = { ciphertextBytesMax, textCellCharsMax, nonceBytes, hashBytes };

export interface VerifyOptions {
  readonly dbPath: string;
  /** From `--checkpoint FILE`: its key is the trust anchor; its size must still be in the log. */
  readonly anchor?: TrustedCheckpoint;
  /**
   * The checkpoint key established outside the journal: the vault's audit signing key, unwrapped with the passphrase
   * (a checkpoint export, `--check-key`). The journal's key, and the anchor's when given, must equal it.
   */
  readonly trustedKey?: Uint8Array;
  /**
   * Told once, before the first row is read, how many rows the file says it holds (the check is what follows): the CLI
   * says at once that a long verify has started, not at its first progress line.
   */
  readonly onStart?: (total: number) => void;
  readonly onProgress?: (rows: number, total: number) => void;
  /** Worker threads for the rows and signatures (default: one per core); 0 keeps every step on this thread. */
  readonly threads?: number;
  /**
   * The daemon's verify: its worker threads run at a lower CPU priority than the thread that called (verify-pool.ts),
   * so the event loop answering operators and agents comes first on a machine whose every core is verifying.
   */
  readonly background?: boolean;
  /** Tests: the row count from which workers are used, and the rows per worker job (log2). */
  readonly parallelRowsMin?: number;
  readonly chunkRowsLog2?: number;
  /** Tests and the bench: whether the rows were proved good on worker threads or checked by the serial steps. */
  readonly onMode?: (mode: 'workers' | 'serial') => void;
}

/**
 * Where the key the signatures were checked under came from. `journal`: the journal's own plaintext `audit_keys` row,
 * which anyone who can write the file can replace along with every checkpoint; only `checkpoint_file` or `vault`
 * ties the signatures to a key the journal's writer cannot choose.
 */
export type KeySource = 'journal' | 'checkpoint_file' | 'vault';

export type VerifyReport =
  | {
      readonly ok: true;
      readonly events: number;
      readonly root: string;
      readonly checkpoints: number;
      readonly last_checkpoint_size: number;
      /** Events after the last signed checkpoint: covered by the tree, not yet by a signature. */
      readonly unsigned_tail: number;
      readonly anchor_size: number | null;
      readonly key_source: KeySource;
    }
  | { readonly ok: false; readonly code: VerifyCode; readonly seq: number | null; readonly message: string };

const sha256: Hash = (data) => hash('sha256', data, 'buffer');
const domain = Buffer.from(checkpointDomain, 'utf8');

/**
 * Verifies a journal offline, over ciphertext, with no vault key: read-only, never migrates or
 * recovers, treats every byte as hostile. The steps, in order; the first that fails names its
 * code and the first bad append position.
 */
export async function verifyJournal(options: VerifyOptions): Promise<VerifyReport> {
  await sodium.ready;
  return readPrivately(options.dbPath, async (file, isPrivate) => {
    let db: Database.Database;
    try {
      db = openReadOnly(file);
    } catch (error) {
      if (isPrivate) throw error;
      return unreadable(error);
    }
    return verifyOpened(db, file, options);
  });
}

/** The steps over one read transaction of `db`, opened on `file` (which the worker threads open too); closes `db`. */
async function verifyOpened(db: Database.Database, file: string, options: VerifyOptions): Promise<VerifyReport> {
  try {
    requireAuditSchema(db);
    // Counted once: where the last position is not a number this is a scan of the whole table.
    const total = rowsToCheck(db);
    options.onStart?.(total);
    const signPublic = readCheckpointKey(db, options.anchor, options.trustedKey);
    const checkpoints = readCheckpoints(db);
    const sizes = interestingSizes(checkpoints, options.anchor);
    const parallel = await recomputeInWorkers(db, file, options, sizes, checkpoints, signPublic);
    options.onMode?.(parallel === undefined ? 'serial' : 'workers');
    const tree = parallel?.tree ?? (await recomputeTree(db, total, sizes, options.onProgress));
    await checkSignatures(checkpoints, signPublic, parallel);
    checkCheckpointRoots(checkpoints, tree);
    const lossEvidence = findLossEvidence(db, tree.frontier.size);
    if (options.anchor !== undefined) checkAnchor(options.anchor, tree, checkpoints, lossEvidence);
    checkTreeHead(db, tree.frontier, lossEvidence);
    const last = checkpoints.at(-1)?.size ?? 0;
    return {
      ok: true,
      events: tree.frontier.size,
      root: Buffer.from(frontierRoot(sha256, tree.frontier)).toString('hex'),
      checkpoints: checkpoints.length,
      last_checkpoint_size: last,
      unsigned_tail: tree.frontier.size - last,
      anchor_size: options.anchor?.size ?? null,
      key_source:
        options.trustedKey !== undefined ? 'vault' : options.anchor !== undefined ? 'checkpoint_file' : 'journal',
    };
  } catch (error) {
    if (error instanceof VerifyFailure) return { ok: false, code: error.code, seq: error.seq, message: error.message };
    return unreadable(error);
  } finally {
    db.close();
  }
}

/** Anything but a VerifyFailure came from reading garbage (SQLITE_NOTADB, SQLITE_CORRUPT, a missing table). */
function unreadable(error: unknown): VerifyReport {
  return {
    ok: false,
    code: 'DB_UNREADABLE',
    seq: null,
    message: `cannot read the journal: ${(error as Error).message}`,
  };
}

/** Read-only and query-only: a running broker may hold the file; nothing here may write it. */
function openReadOnly(file: string): Database.Database {
  const db = openDatabase(file, { readonly: true, fileMustExist: true });
  db.pragma('query_only = 1');
  db.pragma(`cache_size = -${verifyCacheKiB}`);
  db.defaultSafeIntegers(true);
  // One read transaction: every step sees the same snapshot even while the broker appends.
  db.exec('BEGIN');
  return db;
}

function requireAuditSchema(db: Database.Database): void {
  const version = Number(db.pragma('user_version', { simple: true }) as bigint);
  if (version < auditSchemaVersion || version > auditSchemaVersionMax) {
    throw new VerifyFailure(
      'SCHEMA_UNSUPPORTED',
      null,
      `schema version ${version}; this verifier reads ${auditSchemaVersion}..${auditSchemaVersionMax}`,
    );
  }
}

/**
 * The trusted key (the vault's) or the anchor's when given, and the journal and the anchor must agree with it;
 * otherwise the journal's own, which is only the journal's claim.
 */
function readCheckpointKey(
  db: Database.Database,
  anchor: TrustedCheckpoint | undefined,
  trustedKey: Uint8Array | undefined,
): Uint8Array | undefined {
  const row = db.prepare(`SELECT sign_public FROM audit_keys WHERE id = 1`).get() as
    { sign_public: unknown } | undefined;
  const stored =
    row === undefined
      ? undefined
      : blob(row.sign_public, publicKeyBytes, publicKeyBytes, 'ROW_MALFORMED', null, 'audit_keys.sign_public');
  if (trustedKey !== undefined) {
    if (!sameKey(stored, trustedKey))
      throw new VerifyFailure(
        'KEY_MISMATCH',
        null,
        "the journal's checkpoint key is not the public half of the vault's audit signing key (audit_keys was rewritten)",
      );
    if (anchor !== undefined && !sameKey(anchor.signPublic, trustedKey))
      throw new VerifyFailure(
        'KEY_MISMATCH',
        null,
        "the trusted checkpoint file's key is not the vault's audit signing key",
      );
    return trustedKey;
  }
  if (anchor === undefined) return stored;
  if (!sameKey(stored, anchor.signPublic)) {
    throw new VerifyFailure(
      'KEY_MISMATCH',
      null,
      "the journal's checkpoint key is not the key in the trusted checkpoint file",
    );
  }
  return anchor.signPublic;
}

function sameKey(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.from(a).equals(Buffer.from(b));
}

function readCheckpoints(db: Database.Database): Checkpoint[] {
  const out: Checkpoint[] = [];
  for (const raw of db
    .prepare(`SELECT size, root, at_ms, signature FROM checkpoints ORDER BY size`)
    .iterate() as IterableIterator<Record<string, unknown>>) {
    if (out.length >= checkpointsMax)
      throw new VerifyFailure('ROW_MALFORMED', null, `more than ${checkpointsMax} checkpoints`);
    const size = int(raw['size'], 'checkpoints.size', null);
    out.push({
      size,
      root: blob(raw['root'], hashBytes, hashBytes, 'ROW_MALFORMED', size, 'checkpoints.root'),
      at_ms: int(raw['at_ms'], 'checkpoints.at_ms', size),
      signature: blob(raw['signature'], signatureBytes, signatureBytes, 'ROW_MALFORMED', size, 'checkpoints.signature'),
    });
  }
  return out;
}

function interestingSizes(checkpoints: readonly Checkpoint[], anchor: TrustedCheckpoint | undefined): Set<number> {
  const sizes = new Set(checkpoints.map((c) => c.size));
  if (anchor !== undefined) sizes.add(anchor.size);
  return sizes;
}

interface RecomputedTree {
  readonly frontier: MerkleFrontier;
  /** The tree head at each checkpoint's (and the anchor's) size, where the log reached it. */
  readonly rootAt: ReadonlyMap<number, Uint8Array>;
}

/** Every row, in append order: well-formed, contiguous, and hashing to its stored leaf. */
async function recomputeTree(
  db: Database.Database,
  total: number,
  sizes: ReadonlySet<number>,
  onProgress: VerifyOptions['onProgress'],
): Promise<RecomputedTree> {
  const rootAt = new Map<number, Uint8Array>();
  if (sizes.has(0)) rootAt.set(0, frontierRoot(sha256, emptyFrontier));
  let frontier = emptyFrontier;
  const rows = db.prepare(
    `SELECT seq, at_ms, action_id, session_id, ticket, lane, kind, run, ${outcomeCell(db)} AS outcome, nonce, ciphertext,
      leaf_hash FROM events ORDER BY seq`,
  );
  for (const raw of rows.iterate() as IterableIterator<Record<string, unknown>>) {
    const expected = frontier.size + 1;
    const seq = int(raw['seq'], 'events.seq', expected);
    if (seq !== expected)
      throw new VerifyFailure('ROW_MISSING', expected, `append position ${expected} is missing (next row is ${seq})`);
    const leaf = leafOfRow(raw, seq);
    const stored = blob(raw['leaf_hash'], hashBytes, hashBytes, 'ROW_MALFORMED', seq, 'events.leaf_hash');
    if (!Buffer.from(stored).equals(Buffer.from(leaf)))
      throw new VerifyFailure('ROW_MODIFIED', seq, `row ${seq} does not hash to its leaf`);
    frontier = appendLeaf(sha256, frontier, leaf);
    if (sizes.has(seq)) rootAt.set(seq, frontierRoot(sha256, frontier));
    if (seq % verifyProgressEveryRows === 0) onProgress?.(seq, total);
    if (seq % yieldEveryRows === 0) await yieldToLoop();
  }
  onProgress?.(frontier.size, total);
  return { frontier, rootAt };
}

interface InWorkers {
  readonly tree: RecomputedTree;
  readonly signaturesChecked: boolean;
  /** The first checkpoint (in size order) whose signature does not verify. */
  readonly firstBadSignature: number | undefined;
}

/**
 * The rows and signatures on worker threads, one Merkle subtree per job (verify-worker-source.ts).
 * This only ever proves a log good: on any doubt (a bad row, a stray row, a worker that failed) it
 * returns undefined and the serial steps run, so every failure keeps its code and position. Worker
 * connections may read a later snapshot than `db`; positions 1..n never change in a journal (its
 * triggers refuse UPDATE and DELETE), and everything n is compared with is read from `db`'s.
 */
async function recomputeInWorkers(
  db: Database.Database,
  file: string,
  options: VerifyOptions,
  sizes: ReadonlySet<number>,
  checkpoints: readonly Checkpoint[],
  signPublic: Uint8Array | undefined,
): Promise<InWorkers | undefined> {
  const n = lastPosition(db);
  if (n === undefined || n < (options.parallelRowsMin ?? parallelRowsMin) || options.threads === 0) return undefined;
  const chunkRows = 2 ** (options.chunkRowsLog2 ?? chunkRowsLog2);
  const sorted = [...sizes].filter((s) => s >= 1 && s <= n).sort((a, b) => a - b);
  const rowJobs: VerifyJob[] = [];
  for (let lo = 1; lo <= n; lo += chunkRows) {
    const hi = Math.min(lo + chunkRows - 1, n);
    rowJobs.push({ kind: 'rows', lo, hi, sizes: sorted.filter((s) => s >= lo && s <= hi) });
  }
  const signatureJobs = signPublic === undefined ? [] : signatureBatches(checkpoints, signPublic);
  let checked = 0;
  let results: VerifyJobResult[];
  try {
    results = await runVerifyJobs(file, [{ kind: 'count', n }, ...signatureJobs, ...rowJobs], {
      bounds,
      progressEveryRows: verifyProgressEveryRows,
      ...(options.threads === undefined ? {} : { threads: options.threads }),
      ...(options.background === true ? { background: true } : {}),
      onRows: (rows) => {
        checked += rows;
        options.onProgress?.(checked, n);
      },
    });
  } catch {
    return undefined;
  }
  const [count, ...rest] = results;
  if (count === undefined || !('rows' in count) || count.rows !== n) return undefined;
  const signatureResults = rest.slice(0, signatureJobs.length);
  if (signatureResults.some((r) => 'failed' in r)) return undefined;
  const tree = await combineSubtrees(rest.slice(signatureJobs.length), rowJobs, sizes, n, chunkRows);
  if (tree === undefined) return undefined;
  const firstBad = signatureResults.find((r): r is { badSize: number } => 'badSize' in r && r.badSize !== undefined);
  return { tree, signaturesChecked: signPublic !== undefined, firstBadSignature: firstBad?.badSize };
}

function signatureBatches(checkpoints: readonly Checkpoint[], signPublic: Uint8Array): VerifyJob[] {
  const jobs: VerifyJob[] = [];
  for (let i = 0; i < checkpoints.length; i += signaturesPerJob) {
    jobs.push({
      kind: 'signatures',
      signPublic,
      checkpoints: checkpoints.slice(i, i + signaturesPerJob).map((c) => ({
        size: c.size,
        message: encodeCheckpointMessage(domain, c.size, c.root, c.at_ms),
        signature: c.signature,
      })),
    });
  }
  return jobs;
}

/**
 * The whole tree from the jobs' subtrees: each full job is one perfect subtree of 2^k leaves, so
 * appending job roots to a frontier counted in jobs is the binary carry of appendLeaf one level up;
 * the last, partial job's roots are all smaller and follow as they are. The head at a size inside a
 * job is the frontier before the job followed by the job's own roots up to that size.
 */
async function combineSubtrees(
  results: readonly VerifyJobResult[],
  jobs: readonly VerifyJob[],
  sizes: ReadonlySet<number>,
  n: number,
  chunkRows: number,
): Promise<RecomputedTree | undefined> {
  const rootAt = new Map<number, Uint8Array>();
  if (sizes.has(0)) rootAt.set(0, frontierRoot(sha256, emptyFrontier));
  let whole = emptyFrontier;
  let tail: readonly Uint8Array[] = [];
  for (const [i, result] of results.entries()) {
    const job = jobs[i];
    if (!('roots' in result) || job?.kind !== 'rows') return undefined;
    for (const [size, local] of result.rootsAt)
      rootAt.set(size, frontierRoot(sha256, { size, roots: [...whole.roots, ...local] }));
    if (job.hi - job.lo + 1 === chunkRows) {
      const root = result.roots[0];
      if (root === undefined || result.roots.length !== 1) return undefined;
      whole = appendLeaf(sha256, whole, root);
    } else tail = result.roots;
    await yieldToLoop();
  }
  return { frontier: { size: n, roots: [...whole.roots, ...tail] }, rootAt };
}

/** The rows the file says it holds: its last append position, or its row count where that position is not a number. */
function rowsToCheck(db: Database.Database): number {
  return lastPosition(db) ?? Number((db.prepare(`SELECT count(*) AS n FROM events`).get() as { n: bigint }).n);
}

/** The last append position when it is one (cheap: the rowid's b-tree), else undefined. */
function lastPosition(db: Database.Database): number | undefined {
  const max = (db.prepare(`SELECT max(seq) AS m FROM events`).get() as { m: unknown }).m;
  if (max === null) return 0;
  if (typeof max === 'bigint' && max >= 0n && max <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(max);
  return undefined;
}

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The events' outcome header column as a SELECT names it: the column since journal schema 25 (migration 025), NULL in
 * a journal from before it, whose headers have none.
 */
export function outcomeCell(db: Database.Database): string {
  const columns = db.prepare(`SELECT name FROM pragma_table_info('events')`).all() as Array<{ name: unknown }>;
  return columns.some((column) => column.name === 'outcome') ? 'outcome' : 'NULL';
}

function leafOfRow(raw: Record<string, unknown>, seq: number): Uint8Array {
  const run = int(raw['run'], 'events.run', seq);
  const header = Buffer.from(
    auditHeaderText({
      at_ms: int(raw['at_ms'], 'events.at_ms', seq),
      action_id: text(raw['action_id'], 'events.action_id', seq),
      session_id: raw['session_id'] === null ? null : text(raw['session_id'], 'events.session_id', seq),
      ticket: raw['ticket'] === null ? null : int(raw['ticket'], 'events.ticket', seq),
      lane: raw['lane'] === null ? null : text(raw['lane'], 'events.lane', seq),
      kind: text(raw['kind'], 'events.kind', seq),
      run,
      outcome: raw['outcome'] === null ? null : text(raw['outcome'], 'events.outcome', seq),
    }),
    'utf8',
  );
  const nonceLength = run === 0 ? 0 : nonceBytes;
  const nonce = blob(raw['nonce'], nonceLength, nonceLength, 'ROW_MALFORMED', seq, 'events.nonce');
  const ciphertext = blob(raw['ciphertext'], 0, ciphertextBytesMax, 'ROW_MALFORMED', seq, 'events.ciphertext');
  return leafHash(sha256, encodeLeaf(seq, header, nonce, ciphertext));
}

/** Every checkpoint in the journal is signed by the checkpoint key (the anchor's, when given). */
async function checkSignatures(
  checkpoints: readonly Checkpoint[],
  signPublic: Uint8Array | undefined,
  checked: InWorkers | undefined,
): Promise<void> {
  if (checked?.signaturesChecked === true && signPublic !== undefined) {
    if (checked.firstBadSignature !== undefined)
      throw new VerifyFailure(
        'SIGNATURE_INVALID',
        checked.firstBadSignature,
        `the signature of checkpoint ${checked.firstBadSignature} does not verify`,
      );
    return;
  }
  for (const [i, c] of checkpoints.entries()) {
    if (i % 16 === 15) await yieldToLoop();
    if (signPublic === undefined)
      throw new VerifyFailure(
        'SIGNATURE_INVALID',
        c.size,
        `checkpoint ${c.size} exists but the journal has no checkpoint key`,
      );
    if (!signatureValid(c, signPublic))
      throw new VerifyFailure('SIGNATURE_INVALID', c.size, `the signature of checkpoint ${c.size} does not verify`);
  }
}

/** Each signed tree head is the head of the rows as they are now. */
function checkCheckpointRoots(checkpoints: readonly Checkpoint[], tree: RecomputedTree): void {
  let lastGood = 0;
  for (const c of checkpoints) {
    const root = tree.rootAt.get(c.size);
    if (root === undefined)
      throw new VerifyFailure(
        'TRUNCATED',
        tree.frontier.size + 1,
        `checkpoint ${c.size} was signed but the log ends at ${tree.frontier.size}`,
      );
    if (!Buffer.from(root).equals(Buffer.from(c.root))) {
      throw new VerifyFailure(
        'FORKED',
        lastGood + 1,
        `the rows up to ${c.size} differ from the signed checkpoint; the change is in ${lastGood + 1}..${c.size}`,
      );
    }
    lastGood = c.size;
  }
}

/** Signs that rows were lost from the end: a high-water mark above the last row. */
function findLossEvidence(db: Database.Database, size: number): string | undefined {
  const sequence = db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'events'`).get() as
    { seq: unknown } | undefined;
  const highWater = sequence === undefined ? 0 : int(sequence.seq, 'sqlite_sequence.seq', null);
  if (highWater > size) return `append positions were issued up to ${highWater}`;
  const head = db.prepare(`SELECT size FROM audit_tree WHERE id = 1`).get() as { size: unknown } | undefined;
  const headSize = head === undefined ? 0 : int(head.size, 'audit_tree.size', null);
  if (headSize > size) return `the stored tree head covers ${headSize} events`;
  return undefined;
}

/** The trusted checkpoint is signed by its own key and is a prefix of this log. */
function checkAnchor(
  anchor: TrustedCheckpoint,
  tree: RecomputedTree,
  checkpoints: readonly Checkpoint[],
  lossEvidence: string | undefined,
): void {
  if (!signatureValid(anchor, anchor.signPublic))
    throw new VerifyFailure(
      'SIGNATURE_INVALID',
      anchor.size,
      'the trusted checkpoint file is not signed by its own key',
    );
  const size = tree.frontier.size;
  if (anchor.size > size) {
    if (lossEvidence !== undefined)
      throw new VerifyFailure(
        'TRUNCATED',
        size + 1,
        `the log ends at ${size}, before the trusted checkpoint at ${anchor.size} (${lossEvidence})`,
      );
    throw new VerifyFailure(
      'ROLLED_BACK',
      size + 1,
      `the log ends at ${size}, before the trusted checkpoint at ${anchor.size}: this is an older copy`,
    );
  }
  const root = tree.rootAt.get(anchor.size);
  if (root === undefined || !Buffer.from(root).equals(Buffer.from(anchor.root))) {
    const lastGood = checkpoints.filter((c) => c.size < anchor.size).at(-1)?.size ?? 0;
    throw new VerifyFailure(
      'FORKED',
      lastGood + 1,
      `the rows up to ${anchor.size} differ from the trusted checkpoint; the change is in ${lastGood + 1}..${anchor.size}`,
    );
  }
}

/** The writer's stored tree state agrees with the rows (nothing appended or lost behind its back). */
function checkTreeHead(db: Database.Database, frontier: MerkleFrontier, lossEvidence: string | undefined): void {
  if (lossEvidence !== undefined)
    throw new VerifyFailure('TRUNCATED', frontier.size + 1, `the log ends at ${frontier.size} but ${lossEvidence}`);
  const head = db.prepare(`SELECT size, frontier FROM audit_tree WHERE id = 1`).get() as
    { size: unknown; frontier: unknown } | undefined;
  if (head === undefined) throw new VerifyFailure('CHAIN_BROKEN', null, 'the stored tree head is missing');
  const size = int(head.size, 'audit_tree.size', null);
  const stored = decodeFrontier(
    size,
    blob(head.frontier, 0, 64 * hashBytes, 'CHAIN_BROKEN', null, 'audit_tree.frontier'),
  );
  if (stored === undefined) throw new VerifyFailure('CHAIN_BROKEN', null, 'the stored tree head is malformed');
  if (size < frontier.size)
    throw new VerifyFailure('CHAIN_BROKEN', size + 1, `rows after ${size} were added outside the journal`);
  if (!sameRoots(stored, frontier)) {
    throw new VerifyFailure('CHAIN_BROKEN', null, 'the stored tree head does not match the rows');
  }
}

function sameRoots(a: MerkleFrontier, b: MerkleFrontier): boolean {
  return (
    a.roots.length === b.roots.length &&
    a.roots.every((r, i) => Buffer.from(r).equals(Buffer.from(b.roots[i] as Uint8Array)))
  );
}

function signatureValid(c: Checkpoint, signPublic: Uint8Array): boolean {
  try {
    return sodium.crypto_sign_verify_detached(
      c.signature,
      encodeCheckpointMessage(domain, c.size, c.root, c.at_ms),
      signPublic,
    );
  } catch {
    return false;
  }
}

function int(value: unknown, field: string, seq: number | null): number {
  if (typeof value === 'bigint' && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
  // A column without a type (sqlite_sequence.seq) may hold an integral REAL.
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  throw new VerifyFailure('ROW_MALFORMED', seq, `${field} is not a non-negative integer`);
}

function text(value: unknown, field: string, seq: number): string {
  if (typeof value === 'string' && value.length <= textCellCharsMax) return value;
  throw new VerifyFailure('ROW_MALFORMED', seq, `${field} is not text of at most ${textCellCharsMax} characters`);
}

function blob(
  value: unknown,
  min: number,
  max: number,
  code: VerifyCode,
  seq: number | null,
  field: string,
): Uint8Array {
  if (value instanceof Uint8Array && value.length >= min && value.length <= max) return value;
  throw new VerifyFailure(code, seq, `${field} is not a blob of ${min === max ? `${min}` : `${min}..${max}`} bytes`);
}
