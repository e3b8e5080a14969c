import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openDatabase, sqliteBindingEnv, sqliteNativeBinding } from './open-database.js';

describe('openDatabase', () => {
  let dir: TempDir | undefined;
  afterEach(() => dir?.remove());

  describe('when running under plain Node (the CLI, the daemon, the tests)', () => {
    it('asks for no native binding, whatever the environment says', () => {
      expect(sqliteNativeBinding({ versions: { node: '20.20.2' }, env: {} })).toBeUndefined();
      expect(
        sqliteNativeBinding({
          versions: { node: '20.20.2' },
          env: { [sqliteBindingEnv]: '/elsewhere/better_sqlite3.node' },
        }),
      ).toBeUndefined();
    });

    it('opens with node_modules’ own build, exactly as `new Database` did', () => {
      expect(process.versions.electron).toBeUndefined();
      dir = createTempDir('postern-open-db-');
      const db = openDatabase(path.join(dir.path, 'x.sqlite'));
      try {
        db.exec('CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (7)');
        expect(db.prepare('SELECT v FROM t').get()).toEqual({ v: 7 });
      } finally {
        db.close();
      }
      const again = openDatabase(path.join(dir.path, 'x.sqlite'), { readonly: true, fileMustExist: true });
      expect(again.readonly).toBe(true);
      again.close();
    });

    it('passes the options through (fileMustExist still refuses a missing file)', () => {
      dir = createTempDir('postern-open-db-');
      expect(() => openDatabase(path.join(dir!.path, 'missing.sqlite'), { fileMustExist: true })).toThrow();
    });
  });

  describe('when running inside Electron', () => {
    it('names the Electron build the shell pointed at', () => {
      expect(
        sqliteNativeBinding({
          versions: { electron: '45.5.0' },
          env: { [sqliteBindingEnv]: '/app/native-electron/better_sqlite3.node' },
        }),
      ).toBe('/app/native-electron/better_sqlite3.node');
    });

    it('refuses to fall back to the Node build when the shell did not say where the Electron build is', () => {
      expect(() => sqliteNativeBinding({ versions: { electron: '45.5.0' }, env: {} })).toThrow(sqliteBindingEnv);
    });
  });
});
