import { existsSync, openSync, readSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import type { KeySource, VerifyReport } from '../audit/verify-journal.js';
import type { TrustedCheckpoint } from '../audit/checkpoint-file.js';
import type { VerifyFailure } from '../audit/verify-codes.js';
import { CodedError } from '../contract/coded-error.js';
import { systemClock } from '../ports/system-clock.js';
import type { Vault } from '../vault/index.js';
import { resolveFromOptions, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { readPassphrase } from './secret-input.js';

/** The journal's file name (journal.ts), here so naming the path does not load the journal. */
const journalFileName = 'journal.sqlite';

/** What the audit commands use of the broker, loaded when one runs, not when `postern` starts (the CLI bundle splits here). */
async function auditModules() {
  const [verify, snapshot, file, exportable, codes, journal, vault] = await Promise.all([
    import('../audit/verify-journal.js'),
    import('../ports/private-snapshot.js'),
    import('../audit/checkpoint-file.js'),
    import('./exportable-checkpoint.js'),
    import('../audit/verify-codes.js'),
    import('../journal/index.js'),
    import('../vault/index.js'),
  ]);
  return { ...verify, ...snapshot, ...file, ...exportable, ...codes, ...journal, ...vault };
}

/**
 * What `audit verify` uses: the verifier and its codes, and the checkpoint file's parser only when a file is given. Not
 * the vault, the journal or the contract's schemas (ssh2, libsodium's vault use, zod: ~180 ms of a cold start; issue
 * 18, tests/cli-bundle.test.ts). `--check-key` loads the vault itself (vaultKeyOf).
 */
async function verifyModules(withCheckpointFile: boolean) {
  const [verify, codes, file] = await Promise.all([
    import('../audit/verify-journal.js'),
    import('../audit/verify-codes.js'),
    withCheckpointFile ? import('../audit/checkpoint-file.js') : undefined,
  ]);
  return { ...verify, ...codes, file };
}

/** Progress on stderr at most this often while verifying a long journal. */
export const verifyProgressIntervalMs = 1_000;
/** From this many rows (~0.3 s of checking on a 2-vCPU VM) a verify says on stderr that it started; a small one answers. */
export const verifyStartLineRowsMin = 100_000;
const seqMax = Number.MAX_SAFE_INTEGER;

interface VerifyOptions extends CommonOptions {
  checkpoint?: string;
  checkKey?: boolean;
  passphraseFile?: string;
  json?: boolean;
}
interface CheckpointOptions extends CommonOptions {
  export: string;
  passphraseFile?: string;
}
interface ExportOptions extends CommonOptions {
  from?: string;
  to?: string;
  passphraseFile?: string;
}

/**
 * `postern audit verify | checkpoint --export | export`. verify needs no key and never writes (with --check-key it
 * asks for the passphrase to check the journal's key against the vault's); checkpoint and export always need the
 * passphrase: the exported checkpoint's key must come from the vault, not from the journal's plaintext key table.
 */
export function registerAuditCommands(program: Command, context: CommandContext): void {
  const { env, io } = context;
  const audit = program.command('audit').description('Check and read the encrypted, Merkle-hashed journal.');

  withPassphraseFile(
    withDataDir(
      audit.command('verify').description('Verify the journal offline, over ciphertext, without the vault key.'),
    ),
    'with --check-key: ',
  )
    .option(
      '--checkpoint <file>',
      'a checkpoint exported earlier: its key is the trust anchor, and the log must still extend it',
    )
    .option(
      '--check-key',
      "also check the journal's checkpoint key against the vault's audit signing key (asks for the vault passphrase; the vault is opened read-only and nothing is written, a wrong passphrase included)",
    )
    .option('--json', 'print one JSON object instead of text')
    .action(async (options: VerifyOptions) => {
      const dataDir = resolveFromOptions(options, env);
      const dbPath = join(dataDir, journalFileName);
      const trustedKey =
        options.checkKey === true ? await vaultKeyOf(dataDir, options.passphraseFile, context) : undefined;
      const report = await runVerify(dbPath, options.checkpoint, io.err, trustedKey);
      if (options.json === true) io.out(JSON.stringify(report));
      else io.out(describeReport(report));
      context.setResult(report.ok ? 0 : 1);
    });

  withPassphraseFile(
    withDataDir(
      audit
        .command('checkpoint')
        .description(
          "Verify the journal under the vault's audit key, sign the events after its newest checkpoint, and write that checkpoint and its key to a file to keep elsewhere (needs the vault passphrase).",
        ),
    ),
  )
    .requiredOption('--export <file>', '(required) where to write the checkpoint (JSON)')
    .action(async (options: CheckpointOptions) => {
      const dataDir = resolveFromOptions(options, env);
      const dbPath = existingJournal(dataDir);
      const m = await auditModules();
      // Always the vault: its signing key is the file's key, and the journal must verify under it (exportable-checkpoint.ts).
      const checkpoint = await withUnlockedVault(dataDir, options.passphraseFile, context, (vault) =>
        m.exportableCheckpoint(dbPath, vault, systemClock, progressOn(io.err)),
      );
      writeFileSync(options.export, m.formatCheckpointFile(checkpoint, systemClock.nowMs()), { mode: 0o644 });
      io.out(`Checkpoint of ${checkpoint.size} events written to ${options.export}`);
    });

  withPassphraseFile(
    withDataDir(
      audit.command('export').description('Print decrypted events as JSON lines (needs the vault passphrase).'),
    ),
  )
    .option('--from <seq>', 'first append position', '1')
    .option('--to <seq>', 'last append position (default: the end)')
    .action(async (options: ExportOptions) => {
      const from = parseSeq(options.from ?? '1', '--from');
      const to = options.to === undefined ? seqMax : parseSeq(options.to, '--to');
      if (to < from)
        throw new CodedError('INVALID_ARGUMENT', `--to (${to}) is before --from (${from})`, { field: '--to' });
      const dataDir = resolveFromOptions(options, env);
      const dbPath = existingJournal(dataDir);
      const { readDecryptedEvents } = await auditModules();
      await withUnlockedVault(dataDir, options.passphraseFile, context, async (vault) => {
        for await (const event of readDecryptedEvents(dbPath, vault, from, to)) io.out(JSON.stringify(event));
      });
    });
}

async function runVerify(
  dbPath: string,
  checkpointFile: string | undefined,
  err: (line: string) => void,
  trustedKey: Uint8Array | undefined,
): Promise<VerifyReport> {
  const { file, verifyJournal, VerifyFailure } = await verifyModules(checkpointFile !== undefined);
  let anchor: TrustedCheckpoint | undefined;
  try {
    if (checkpointFile !== undefined && file !== undefined)
      anchor = file.parseCheckpointFile(readBounded(checkpointFile, file.checkpointFileBytesMax, VerifyFailure));
  } catch (error) {
    if (error instanceof VerifyFailure) return { ok: false, code: error.code, seq: error.seq, message: error.message };
    throw error;
  }
  if (!existsSync(dbPath)) return { ok: false, code: 'DB_UNREADABLE', seq: null, message: `${dbPath} does not exist` };
  return verifyJournal({
    dbPath,
    ...(anchor === undefined ? {} : { anchor }),
    ...(trustedKey === undefined ? {} : { trustedKey }),
    onStart: (total) => {
      if (total >= verifyStartLineRowsMin) err(`verify: ${total} rows to check`);
    },
    onProgress: progressOn(err),
  });
}

/** Verify progress on stderr, at most once per verifyProgressIntervalMs. */
function progressOn(err: (line: string) => void): (rows: number, total: number) => void {
  let lastReportMs = Date.now();
  return (rows, total) => {
    const now = Date.now();
    if (now - lastReportMs < verifyProgressIntervalMs) return;
    lastReportMs = now;
    err(`verify: ${rows}/${total} rows (${Math.floor((rows / Math.max(total, 1)) * 100)}%)`);
  };
}

/** What the signatures were checked under, said every time: without a trusted key it is the journal's own claim. */
const keySourceText: { readonly [S in KeySource]: string } = {
  journal:
    "checkpoint key: the journal's own (audit_keys), which whoever can write the file can replace with every " +
    'checkpoint; check it with --checkpoint FILE (from `postern audit checkpoint --export`) or --check-key',
  checkpoint_file: "checkpoint key: the --checkpoint file's",
  vault: "checkpoint key: the vault's audit signing key",
};

function describeReport(report: VerifyReport): string {
  if (!report.ok)
    return `FAILED ${report.code}${report.seq === null ? '' : ` at seq ${report.seq}`}: ${report.message}`;
  const anchor = report.anchor_size === null ? '' : `; extends the trusted checkpoint at ${report.anchor_size}`;
  return `OK: ${report.events} events, root ${report.root}, ${report.checkpoints} signed checkpoints (last at ${report.last_checkpoint_size}; ${report.unsigned_tail} events after it)${anchor}; ${keySourceText[report.key_source]}`;
}

/**
 * The vault's checkpoint key, for `verify --check-key`. The passphrase opens a vault opened read-only (no vault file
 * is created, none migrated or chmodded), and the journal is read read-only: nothing in the data directory is
 * written, a wrong passphrase included (no attempt is recorded anywhere: it costs one Argon2id derivation, docs/audit.md).
 */
async function vaultKeyOf(
  dataDir: string,
  passphraseFile: string | undefined,
  context: CommandContext,
): Promise<Uint8Array> {
  const dbPath = existingJournal(dataDir);
  const { vaultCheckpointKey, readPrivately } = await auditModules();
  // The journal's wrapped key read as the verify reads it: nothing appears beside a closed journal.
  const key = await withUnlockedVault(
    dataDir,
    passphraseFile,
    context,
    (vault) => readPrivately(dbPath, (file) => vaultCheckpointKey(file, vault)),
    { readOnly: true },
  );
  if (key === undefined)
    throw new CodedError('AUDIT_KEY_UNAVAILABLE', 'no audit key exists yet: the broker creates it at the first unlock');
  return key;
}

/** Reads at most `max` bytes (+1 to notice more) so a huge or endless file cannot exhaust memory. */
function readBounded(path: string, max: number, Failure: typeof VerifyFailure): Buffer {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    throw new Failure('CHECKPOINT_FILE_INVALID', null, `cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    const buffer = Buffer.alloc(max + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < buffer.length; length += n)
      n = readSync(fd, buffer, length, buffer.length - length, null);
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

function existingJournal(dataDir: string): string {
  const path = join(dataDir, journalFileName);
  if (!existsSync(path)) throw new CodedError('INVALID_ARGUMENT', `no journal in ${dataDir}`, { field: '--data-dir' });
  return path;
}

function parseSeq(raw: string, field: string): number {
  const seq = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(seq) || seq < 1)
    throw new CodedError('INVALID_ARGUMENT', `must be a positive integer (got ${JSON.stringify(raw)})`, { field });
  return seq;
}

function withPassphraseFile(command: Command, when = ''): Command {
  return command.option(
    '--passphrase-file <file>',
    `${when}read the vault passphrase from this file; else POSTERN_PASSPHRASE_FILE; else ask on the terminal`,
  );
}

async function withUnlockedVault<T>(
  dataDir: string,
  passphraseFile: string | undefined,
  context: CommandContext,
  use: (vault: Vault) => Promise<T>,
  options: { readOnly?: boolean } = {},
): Promise<T> {
  const passphrase = await readPassphrase({ file: passphraseFile, env: context.env }, 'Vault passphrase');
  try {
    const { openVault } = await import('../vault/index.js');
    // Inside the try: a vault that cannot be opened (none there, read-only and older) still zeroes the passphrase.
    const vault = await openVault({ dataDir, clock: systemClock, ...options });
    try {
      await vault.unlock(passphrase);
      return await use(vault);
    } finally {
      await vault.close();
    }
  } finally {
    passphrase.fill(0);
  }
}
