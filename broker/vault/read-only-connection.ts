import type Database from 'better-sqlite3';
import { CodedError } from '../contract/coded-error.js';
import { openDatabase, statementCache } from '../ports/open-database.js';
import { privateReadsMax, privateSnapshot, type PrivateSnapshot } from '../ports/private-snapshot.js';

interface Opened {
  readonly db: Database.Database;
  readonly sql: (sql: string) => Database.Statement;
  /** undefined: the file itself under SQLite's locking. */
  readonly snapshot: PrivateSnapshot | undefined;
}

/** What to do after a private snapshot could not be opened. */
type Miss = 'again' | 'locking';

/**
 * The connection a read-only vault store reads through (`postern audit verify --check-key`, `postern vault list`):
 * nothing appears beside a `vault.sqlite` that had no `-wal` or `-shm` (broker/ports/private-snapshot.ts picks
 * `immutable`, a private copy, or SQLite's locking when a broker has the vault open). The store keeps its connection
 * while the vault is unlocked (Argon2id) and used, so a lock-free snapshot stays open across several reads, and a
 * broker may write the file meanwhile. Hence every read counts only if the file is still as it was when the snapshot
 * was taken, checked right after that read; otherwise the connection is made again over a fresh snapshot and the read
 * repeated. After `privateReadsMax` snapshots in the connection's life it reads under SQLite's locking (which may then
 * leave the two sidecars, holding no row). No answer comes from a file that changed under the read. A private copy is
 * removed at close.
 */
export class ReadOnlyConnection {
  private opened: Opened;
  private snapshotsTaken = 0;
  /** Moves each time the connection is made again: what a caller kept from an older one is not the file's any more. */
  generation = 0;

  /** `prepare` runs on every connection made (pragmas, the schema check); its coded refusal is the file's answer. */
  constructor(
    private readonly path: string,
    private readonly options: Database.Options,
    private readonly prepare: (db: Database.Database) => void,
  ) {
    this.opened = this.connect();
  }

  get db(): Database.Database {
    return this.opened.db;
  }

  get sql(): (sql: string) => Database.Statement {
    return this.opened.sql;
  }

  /** `query`'s answer from a file that held still under it (`query` reads through `sql`, which follows a reconnect). */
  read<T>(query: () => T): T {
    for (;;) {
      const { snapshot } = this.opened;
      let value: T;
      try {
        value = query();
      } catch (error) {
        // A failure on a file that held still is the file's; one on a file that moved may be a torn read.
        if (snapshot === undefined || snapshot.settled()) throw error;
        this.reconnect();
        continue;
      }
      if (snapshot === undefined || snapshot.settled()) return value;
      this.reconnect();
    }
  }

  close(): void {
    if (this.opened.db.open) this.opened.db.close();
    this.opened.snapshot?.dispose();
  }

  private reconnect(): void {
    this.close();
    this.generation += 1;
    this.opened = this.connect();
  }

  private connect(): Opened {
    while (this.snapshotsTaken < privateReadsMax) {
      this.snapshotsTaken += 1;
      let snapshot: PrivateSnapshot | undefined;
      try {
        snapshot = privateSnapshot(this.path);
      } catch {
        // No private copy (a full or unwritable temporary directory): the locking read answers.
        break;
      }
      if (snapshot === undefined) break;
      const opened = this.openPrivate(snapshot);
      if (opened === 'locking') break;
      if (opened !== 'again') return opened;
    }
    this.snapshotsTaken = privateReadsMax;
    return { ...this.openPrepared(this.path), snapshot: undefined };
  }

  private openPrivate(snapshot: PrivateSnapshot): Opened | Miss {
    let opened: Omit<Opened, 'snapshot'> | undefined;
    try {
      opened = this.openPrepared(snapshot.file);
      if (snapshot.settled()) return { ...opened, snapshot };
      opened.db.close();
      snapshot.dispose();
      return 'again';
    } catch (error) {
      snapshot.dispose();
      const settled = snapshot.settled();
      // A refusal (a schema this Postern does not read) from a file that held still is the file's answer.
      if (settled && error instanceof CodedError) throw error;
      // URI filenames off in this process, the copy unreadable: the locking read answers; a moved file: again.
      return settled ? 'locking' : 'again';
    }
  }

  private openPrepared(file: string): Omit<Opened, 'snapshot'> {
    const db = openDatabase(file, this.options);
    try {
      this.prepare(db);
      return { db, sql: statementCache(db) };
    } catch (error) {
      db.close();
      throw error;
    }
  }
}
