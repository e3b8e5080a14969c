/**
 * The verifier's worker thread, as plain CommonJS evaluated from a string (the pattern of
 * vault/kdf-worker.ts): it loads better-sqlite3 and libsodium by resolved path, so it runs the same
 * from the TypeScript sources (tsx, vitest), the CLI bundle and the Electron bundle, with no entry
 * file to find beside a bundle.
 *
 * It answers three jobs, each over its own read-only connection:
 * - rows: positions lo..hi must each be one row, in order; each row well-formed and hashing to its
 *   stored leaf. Returns the compact range (RFC 9162 subtree roots) of its leaves, and at each
 *   asked-for size inside the range the compact range up to there. The checks are the ones
 *   verify-journal.ts's leafOfRow and recomputeTree make, and the leaf bytes are core/audit-record.ts's
 *   encodeLeaf of auditHeaderText (verify-worker-source.test.ts checks them on generated text cells). A failure
 *   names only the position: the caller re-runs the serial verifier for the code and message, so
 *   every failure is reported exactly as the serial steps report it.
 * - count: the rows that are not integer positions in 1..n, plus those that are; n of them means
 *   there is no other row (a NULL, text, real or out-of-range seq).
 * - signatures: the first checkpoint of a batch whose Ed25519 signature does not verify.
 *
 * The row loop allocates little per row: one reused buffer holds each leaf's bytes and one each
 * interior node's; rows come as arrays (raw), integers as numbers, and the blob columns as SQLite's hex() text
 * (with one flag that each is a blob), decoded into the leaf buffer, since a Buffer per blob per row cost more than the
 * rest of the row. For the same reason every hash is a hex string until a job's roots are sent back.
 */
export const verifyWorkerSource = String.raw`
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { hash } = require('node:crypto');
const Database = require(workerData.sqlitePath);
const bounds = workerData.bounds;
let db;
let rowsStatement;
let sodium;

// A background verify: this thread takes a lower priority than the one that started it. Linux's setpriority names a
// thread by its id (/proc/thread-self/status); where there is no such file the thread keeps the caller's priority.
if (workerData.niceness > 0) {
  try {
    // NStgid and NSpid list the ids from the namespace of the mounted /proc down to this process's own PID namespace,
    // the one setpriority and process.pid speak: the last of each. (The link /proc/thread-self and the Tgid/Pid lines
    // are numbered in the mounted /proc's namespace, another one under unshare -p without its own /proc, where the
    // number could be another process's here.) The process id must be ours, the thread's must not: a thread only.
    const status = require('node:fs').readFileSync('/proc/thread-self/status', 'latin1');
    const own = (name) => {
      const line = status.split('\n').find((l) => l.startsWith(name + ':'));
      return line === undefined ? NaN : Number(line.slice(name.length + 1).trim().split(/\s+/).pop());
    };
    const tgid = own('NStgid');
    const tid = own('NSpid');
    const os = require('node:os');
    if (tgid === process.pid && Number.isSafeInteger(tid) && tid > 0 && tid !== process.pid)
      os.setPriority(tid, Math.min(19, os.getPriority(tid) + workerData.niceness));
  } catch {
    // Not Linux, or no /proc: the verify runs at the caller's priority.
  }
}

function open() {
  if (db !== undefined) return;
  const options = { readonly: true, fileMustExist: true };
  if (workerData.nativeBinding !== undefined) options.nativeBinding = workerData.nativeBinding;
  db = new Database(workerData.dbPath, options);
  db.pragma('query_only = 1');
  // One pass in order reads each page once: a page cache (better-sqlite3 defaults to 16 MB per connection) only adds RSS.
  db.pragma('cache_size = ' + workerData.cacheKiB * -1);
  rowsStatement = db
    .prepare(
      "SELECT seq, at_ms, action_id, session_id, ticket, lane, kind, run, " +
        "typeof(nonce) = 'blob' AND typeof(ciphertext) = 'blob' AND typeof(leaf_hash) = 'blob', " +
        'hex(nonce), hex(ciphertext), lower(hex(leaf_hash)), ' +
        outcomeCell() +
        ' FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq',
    )
    .raw(true);
}

/** The outcome header column (journal schema 25 on), or NULL in an older journal (verify-journal.ts outcomeCell). */
function outcomeCell() {
  const columns = db.prepare("SELECT name FROM pragma_table_info('events')").all();
  return columns.some((column) => column.name === 'outcome') ? 'outcome' : 'NULL';
}

const isCount = (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isText = (v) => typeof v === 'string' && v.length <= bounds.textCellCharsMax;
/** A blob column read as SQLite's hex(): its byte length is within min..max. */
const isHexOf = (v, min, max) => typeof v === 'string' && v.length >= 2 * min && v.length <= 2 * max;

// Printable ASCII but '"' and '\\': JSON.stringify leaves these strings as they are, between quotes.
const plain = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
/** JSON.stringify of a text cell or null (auditHeaderText's canonical JSON), without building an array per row. */
const quoted = (v) => (v === null ? 'null' : plain.test(v) ? '"' + v + '"' : JSON.stringify(v));

let leafBuffer = Buffer.alloc(64 * 1024);
const nodeBuffer = Buffer.alloc(1 + 2 * bounds.hashBytes);
nodeBuffer[0] = 1;

// Hashes are lowercase hex strings here, not Buffers: node:crypto's hash() answers a string in a fifth of the time it
// takes to make its Buffer (0.3-0.4 against 1.3-1.5 µs a call on this machine), and the stored leaf comes from SQL as
// lower(hex()), compared as a string.
function nodeHash(left, right) {
  nodeBuffer.write(left, 1, 'hex');
  nodeBuffer.write(right, 1 + bounds.hashBytes, 'hex');
  return hash('sha256', nodeBuffer, 'hex');
}

/** H(0x00 || u64be(seq) || u32be(len(header)) || header || u32be(len(nonce)) || nonce || ciphertext), or undefined if malformed. */
function leafOf(r, seq) {
  const atMs = r[1], action = r[2], session = r[3], ticket = r[4], lane = r[5], kind = r[6], run = r[7], blobs = r[8], nonce = r[9], ct = r[10], outcome = r[12];
  if (!isCount(atMs) || !isText(action) || !isText(kind) || !isCount(run)) return undefined;
  if (outcome !== null && !isText(outcome)) return undefined;
  if ((session !== null && !isText(session)) || (lane !== null && !isText(lane)) || (ticket !== null && !isCount(ticket)))
    return undefined;
  const nonceLength = run === 0 ? 0 : bounds.nonceBytes;
  if (blobs !== 1 || !isHexOf(nonce, nonceLength, nonceLength) || !isHexOf(ct, 0, bounds.ciphertextBytesMax)) return undefined;
  const header = '[' + atMs + ',' + quoted(action) + ',' + quoted(session) + ',' + ticket + ',' + quoted(lane) + ',' + quoted(kind) + ',' + run + (outcome === null ? ']' : ',' + quoted(outcome) + ']');
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  const need = 1 + 8 + 4 + 3 * header.length + 4 + (nonce.length + ct.length) / 2;
  if (leafBuffer.length < need) leafBuffer = Buffer.alloc(need * 2);
  const b = leafBuffer;
  b[0] = 0;
  b.writeUInt32BE(Math.floor(seq / 0x100000000), 1);
  b.writeUInt32BE(seq >>> 0, 5);
  const headerBytes = b.write(header, 13, 'utf8');
  b.writeUInt32BE(headerBytes, 9);
  let at = 13 + headerBytes;
  b.writeUInt32BE(nonce.length / 2, at);
  at += 4;
  // The blobs come as hex text and are decoded into the one reused buffer: a Buffer per blob per row cost more
  // than the rest of the row (bench/audit.ts).
  at += b.write(nonce, at, 'hex');
  at += b.write(ct, at, 'hex');
  return hash('sha256', b.subarray(0, at), 'hex');
}

function rowsJob(job) {
  open();
  const sizes = new Set(job.sizes);
  const roots = [];
  const rootsAt = [];
  let count = 0;
  let expected = job.lo;
  for (const r of rowsStatement.iterate(job.lo, job.hi)) {
    if (r[0] !== expected) return { bad: expected };
    const leaf = leafOf(r, expected);
    const stored = r[11];
    // The stored leaf is lower(hex()) of a blob (checked), so equal strings are equal bytes.
    if (leaf === undefined || leaf !== stored) return { bad: expected };
    let node = leaf;
    for (let n = count; (n & 1) === 1; n = n >>> 1) node = nodeHash(roots.pop(), node);
    roots.push(node);
    count += 1;
    if (sizes.has(expected)) rootsAt.push([expected, roots.map(fromHex)]);
    if (count % workerData.progressEveryRows === 0) parentPort.postMessage({ progress: workerData.progressEveryRows });
    expected += 1;
  }
  if (expected !== job.hi + 1) return { bad: expected };
  parentPort.postMessage({ progress: count % workerData.progressEveryRows });
  return { roots: roots.map(fromHex), rootsAt };
}

const fromHex = (h) => Buffer.from(h, 'hex');

function countJob(job) {
  open();
  const row = db
    .prepare("SELECT count(*) FROM events WHERE seq IS NULL OR typeof(seq) <> 'integer' OR seq <= ?")
    .raw(true)
    .get(job.n);
  return { rows: Number(row[0]) };
}

function signaturesJob(job) {
  sodium ??= require(workerData.sodiumPath);
  return sodium.ready.then(() => {
    for (const c of job.checkpoints) {
      let valid = false;
      try {
        valid = sodium.crypto_sign_verify_detached(c.signature, c.message, job.signPublic);
      } catch {
        valid = false;
      }
      if (!valid) return { badSize: c.size };
    }
    return {};
  });
}

parentPort.on('message', async (job) => {
  if (job.kind === 'end') {
    if (db !== undefined) db.close();
    parentPort.close();
    return;
  }
  try {
    const result = job.kind === 'rows' ? rowsJob(job) : job.kind === 'count' ? countJob(job) : await signaturesJob(job);
    parentPort.postMessage({ id: job.id, result });
  } catch (error) {
    // Garbage the serial steps will name (SQLITE_CORRUPT, a missing table): only "this job failed" crosses.
    parentPort.postMessage({ id: job.id, failed: String(error && error.code ? error.code : 'ERROR') });
  }
});
`;
