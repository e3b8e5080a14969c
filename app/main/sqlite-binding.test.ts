import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { electronSqliteBinding, missingSqliteBuildMessage } from './sqlite-binding.js';

describe('where main finds better-sqlite3’s Electron build', () => {
  it('when packaged: the native-electron extra resource', () => {
    expect(
      electronSqliteBinding({
        isPackaged: true,
        resourcesPath: '/opt/Postern/resources',
        appPath: '/opt/Postern/resources/app.asar',
      }),
    ).toBe(
      path.join(
        '/opt/Postern/resources',
        'native-electron',
        'better-sqlite3',
        'build',
        'Release',
        'better_sqlite3.node',
      ),
    );
  });

  it('when run from the repository: dist/native-electron, never node_modules', () => {
    const file = electronSqliteBinding({
      isPackaged: false,
      resourcesPath: '/x/electron/dist/resources',
      appPath: '/work/main',
    });
    expect(file).toBe(
      path.join('/work/main', 'dist', 'native-electron', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'),
    );
    expect(file).not.toContain('node_modules');
  });

  it('says how to make it when it is missing', () => {
    expect(missingSqliteBuildMessage('/w/x.node', false)).toContain('npm run rebuild:electron-native');
    expect(missingSqliteBuildMessage('/w/x.node', true)).toContain('incomplete');
  });
});
