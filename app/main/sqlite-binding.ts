import path from 'node:path';

/**
 * Where better-sqlite3's Electron-ABI build lives. scripts/rebuild-electron-native.mjs writes it to
 * dist/native-electron/ (never into node_modules, whose Node build the tests use); electron-builder
 * ships that folder as the extra resource `native-electron/`. main puts the path in
 * POSTERN_SQLITE_NATIVE_BINDING before the broker opens anything (broker/ports/open-database.ts).
 */
/** The variable broker/ports/open-database.ts reads inside Electron (app/ may not import broker/ports; a test keeps the two equal). */
export const sqliteBindingEnv = 'POSTERN_SQLITE_NATIVE_BINDING';

export const electronSqliteRelative = path.join('better-sqlite3', 'build', 'Release', 'better_sqlite3.node');

export interface AppLocation {
  /** app.isPackaged */
  readonly isPackaged: boolean;
  /** process.resourcesPath (the packaged app's resources/ folder). */
  readonly resourcesPath: string;
  /** app.getAppPath(): the package root when run as `electron <packageRoot>`. */
  readonly appPath: string;
}

export function electronSqliteBinding(location: AppLocation): string {
  return location.isPackaged
    ? path.join(location.resourcesPath, 'native-electron', electronSqliteRelative)
    : path.join(location.appPath, 'dist', 'native-electron', electronSqliteRelative);
}

/** Said once, in the error dialog, when the build is missing. */
export function missingSqliteBuildMessage(file: string, isPackaged: boolean): string {
  return isPackaged
    ? `This package is incomplete: better-sqlite3's Electron build is missing at ${file}.`
    : `better-sqlite3 has no Electron build at ${file}. Run \`npm run rebuild:electron-native\` (it needs Electron's headers, ` +
        'which are downloaded from the network), or use `postern daemon` (plain Node) instead.';
}
