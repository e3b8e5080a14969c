import Database from 'better-sqlite3';

/**
 * Every SQLite connection the journal opens goes through here, so the one difference between Node
 * and Electron lives in one place. Under Node (the CLI, the daemon, every test) nothing changes:
 * better-sqlite3 loads the build in node_modules. Inside Electron (`process.versions.electron`)
 * that build has the wrong ABI, so the connection names the Electron build that
 * scripts/rebuild-electron-native.mjs made in its own folder; the Electron shell says where it is
 * in POSTERN_SQLITE_NATIVE_BINDING (app/main/sqlite-binding.ts) before the broker starts.
 */
export const sqliteBindingEnv = 'POSTERN_SQLITE_NATIVE_BINDING';

// URI filenames (`file:…?immutable=1`), which the offline verifier opens a closed journal (and vault) with so that SQLite creates
// no `-wal` or `-shm` beside it (broker/ports/private-snapshot.ts). better-sqlite3 compiles them off and reads this
// once, when its addon loads at the process's first connection: this module is imported before any is made. Every
// other connection names a plain absolute path, which a URI-enabled SQLite reads as before.
process.env['SQLITE_USE_URI'] ??= '1';

export interface SqliteRuntime {
  readonly versions: Readonly<Record<string, string | undefined>>;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The `nativeBinding` option for this process: undefined under plain Node. */
export function sqliteNativeBinding(
  runtime: SqliteRuntime = { versions: process.versions, env: process.env },
): string | undefined {
  if (runtime.versions['electron'] === undefined) return undefined;
  const file = runtime.env[sqliteBindingEnv];
  // A programmer error: the default loader would pick node_modules' Node build and fail with an ABI message.
  if (file === undefined || file === '')
    throw new Error(`running inside Electron, but ${sqliteBindingEnv} does not name better-sqlite3's Electron build`);
  return file;
}

export function openDatabase(file: string, options: Database.Options = {}): Database.Database {
  const nativeBinding = sqliteNativeBinding();
  return new Database(file, nativeBinding === undefined ? options : { ...options, nativeBinding });
}

/**
 * A connection's statements compiled once and reused (better-sqlite3's prepare compiles the SQL every call: on a
 * per-action path that is a parse and plan per row). Keyed by the SQL text; the set of texts is fixed by the code,
 * so the cache is bounded by it.
 */
export function statementCache(db: Database.Database): (sql: string) => Database.Statement {
  const statements = new Map<string, Database.Statement>();
  return (sql) => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
}
