import type { Database } from 'better-sqlite3';
import { CodedError } from '../contract/index.js';

/** What the connection reports after the durability pragmas were set. */
export interface DurabilityReadBack {
  journal_mode: string;
  /** 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA. */
  synchronous: number;
  /** Only meaningful on macOS, where fsync() does not flush the drive cache. */
  fullfsync: number;
  checkpoint_fullfsync: number;
  /** Pages after which a COMMIT checkpoints on its own thread; 0 on the journal's connection (wal-checkpointer.ts). */
  wal_autocheckpoint: number;
}

const synchronousNormal = 1;
const synchronousFull = 2;

/**
 * Who makes a commit durable. `commit`: SQLite, inside COMMIT (synchronous=FULL), on the event loop — kept where a
 * plain fsync is not a flush (macOS: F_FULLFSYNC, which node's fs cannot issue). `behind`: the journal, after
 * COMMIT, with fdatasync on the WAL file through libuv's thread pool (broker/journal/wal-sync.ts), so the loop never
 * waits for the disk; the connection runs synchronous=NORMAL (WAL frames written at COMMIT, not synced) and no
 * caller that needs a record durable is answered before the fdatasync that covers it returns.
 */
export type SyncMode = 'commit' | 'behind';

export function syncModeFor(platform: NodeJS.Platform): SyncMode {
  return platform === 'darwin' ? 'commit' : 'behind';
}

/**
 * Sets WAL on this connection, and synchronous=FULL (mode `commit`: better-sqlite3's bundled build defaults WAL
 * connections to NORMAL, which may lose the last commits on power loss — exactly the DISPATCH_STARTED rows we must
 * never lose) plus F_FULLFSYNC on macOS, or synchronous=NORMAL (mode `behind`: the journal fdatasyncs the WAL itself
 * before it answers, see SyncMode), then reads every setting back: a pragma that is silently ignored (an in-memory
 * database, a read-only file system, an old SQLite) must stop the broker rather than let it dispatch on a promise it
 * cannot keep.
 */
export function requireDurableConnection(
  db: Database,
  platform: NodeJS.Platform,
  mode: SyncMode = syncModeFor(platform),
): DurabilityReadBack {
  db.pragma('journal_mode = WAL');
  db.pragma(mode === 'commit' ? 'synchronous = FULL' : 'synchronous = NORMAL');
  if (platform === 'darwin') {
    db.pragma('fullfsync = ON');
    db.pragma('checkpoint_fullfsync = ON');
  }
  const readBack = readDurability(db);
  assertDurable(readBack, platform, mode);
  return readBack;
}

export function readDurability(db: Database): DurabilityReadBack {
  return {
    journal_mode: String(db.pragma('journal_mode', { simple: true })).toLowerCase(),
    synchronous: Number(db.pragma('synchronous', { simple: true })),
    fullfsync: Number(db.pragma('fullfsync', { simple: true })),
    checkpoint_fullfsync: Number(db.pragma('checkpoint_fullfsync', { simple: true })),
    wal_autocheckpoint: Number(db.pragma('wal_autocheckpoint', { simple: true })),
  };
}

/** Throws JOURNAL_NOT_DURABLE naming the first setting that is not in force. */
export function assertDurable(
  readBack: DurabilityReadBack,
  platform: NodeJS.Platform,
  mode: SyncMode = syncModeFor(platform),
): void {
  if (readBack.journal_mode !== 'wal') {
    refuse(`journal_mode is ${readBack.journal_mode}, not wal`);
  }
  // EXTRA (3) is stronger than FULL and also acceptable. NORMAL only where the journal syncs the WAL itself.
  const least = mode === 'commit' ? synchronousFull : synchronousNormal;
  if (readBack.synchronous < least) {
    refuse(`synchronous is ${readBack.synchronous}, not ${mode === 'commit' ? 'FULL' : 'NORMAL'} (${least})`);
  }
  if (mode === 'behind' && platform === 'darwin')
    refuse('sync-behind needs F_FULLFSYNC, which node cannot issue on macOS');
  if (platform === 'darwin') {
    if (readBack.fullfsync !== 1) refuse(`fullfsync is ${readBack.fullfsync}, not ON`);
    if (readBack.checkpoint_fullfsync !== 1) refuse(`checkpoint_fullfsync is ${readBack.checkpoint_fullfsync}, not ON`);
  }
}

function refuse(what: string): never {
  throw new CodedError('JOURNAL_NOT_DURABLE', `the journal database refused a durability setting: ${what}`);
}
