import { chmodSync, mkdirSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { CodedError } from '../contract/coded-error.js';

/** What the data-dir choice depends on, passed in so the rule is a pure function of it. */
export interface DataDirInputs {
  /** The `--data-dir` flag as typed, if given. */
  flag: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  platform: NodeJS.Platform;
  /** The user's home directory (os.homedir()). */
  home: string;
  /** Where a relative flag or env value is resolved from. */
  cwd: string;
}

/**
 * Where Postern keeps its journal, vault and settings: the flag, else POSTERN_DATA_DIR, else the
 * platform's per-user application data folder. Pure: the same inputs always give the same path.
 */
export function resolveDataDir(inputs: DataDirInputs): string {
  const p = inputs.platform === 'win32' ? path.win32 : path.posix;
  if (inputs.flag !== undefined) {
    if (inputs.flag.trim() === '') {
      throw new CodedError('INVALID_ARGUMENT', 'must name a directory (got an empty string)', { field: '--data-dir' });
    }
    return p.resolve(inputs.cwd, inputs.flag);
  }
  const fromEnv = inputs.env['POSTERN_DATA_DIR'];
  if (fromEnv !== undefined && fromEnv.trim() !== '') return p.resolve(inputs.cwd, fromEnv);
  return platformDefault(inputs, p);
}

function platformDefault(inputs: DataDirInputs, p: path.PlatformPath): string {
  const { env, home } = inputs;
  if (inputs.platform === 'win32') {
    const appData = env['APPDATA'];
    if (appData !== undefined && p.isAbsolute(appData)) return p.join(appData, 'Postern');
    return p.join(requireHome(home, p), 'AppData', 'Roaming', 'Postern');
  }
  if (inputs.platform === 'darwin') {
    return p.join(requireHome(home, p), 'Library', 'Application Support', 'Postern');
  }
  // XDG Base Directory: a relative XDG_DATA_HOME is invalid and must be ignored.
  const xdg = env['XDG_DATA_HOME'];
  if (xdg !== undefined && p.isAbsolute(xdg)) return p.join(xdg, 'postern');
  return p.join(requireHome(home, p), '.local', 'share', 'postern');
}

function requireHome(home: string, p: path.PlatformPath): string {
  if (home === '' || !p.isAbsolute(home)) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      'no home directory to derive a default from; pass --data-dir or set POSTERN_DATA_DIR',
      {
        field: '--data-dir',
      },
    );
  }
  return home;
}

const privateModeMask = 0o077;

/**
 * Creates the data directory with mode 0700 (an explicit chmod: mkdir's mode is masked by the
 * umask). An existing directory is used only if it is already private to this user, because the
 * journal and the vault live here: widening or silently tightening someone else's directory
 * (think `--data-dir /tmp`) would both be wrong.
 */
export function ensureDataDir(dir: string): void {
  const existing = statOrUndefined(dir);
  if (existing === undefined) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (process.platform !== 'win32') chmodSync(dir, 0o700);
    return;
  }
  if (!existing.isDirectory()) {
    throw new CodedError('INVALID_ARGUMENT', `${dir} exists and is not a directory`, { field: '--data-dir' });
  }
  if (process.platform === 'win32') return;
  const uid = process.getuid?.();
  if (uid !== undefined && existing.uid !== uid) {
    throw new CodedError('INVALID_ARGUMENT', `${dir} belongs to another user (uid ${existing.uid})`, {
      field: '--data-dir',
    });
  }
  if ((existing.mode & privateModeMask) !== 0) {
    const mode = (existing.mode & 0o777).toString(8).padStart(4, '0');
    throw new CodedError(
      'INVALID_ARGUMENT',
      `${dir} is accessible to other users (mode ${mode}); use a private directory or chmod 700 it`,
      { field: '--data-dir' },
    );
  }
}

function statOrUndefined(target: string): Stats | undefined {
  try {
    return statSync(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
