import { Option, type Command } from 'commander';
import { isMember } from '../contract/closed-set.js';
import { CodedError, isCodedError } from '../contract/coded-error.js';
import { ErrorCode } from '../contract/error-codes.js';
import type { ControlReply, ControlRequest } from '../host/control-client.js';
import { controlSocketPath } from '../host/control-socket-path.js';
import { credentialKinds, type CredentialInfo, type CredentialKind } from '../ports/credential-vault.js';
import { systemClock } from '../ports/system-clock.js';
import type { FirstUseAtCreation } from '../host/config-integrity.js';
import type { Vault } from '../vault/index.js';
import {
  existingDataDir,
  prepareDataDir,
  withDataDir,
  type CommandContext,
  type CommonOptions,
} from './command-context.js';
import {
  passphraseFileNamed,
  passphraseFromFile,
  readPassphrase,
  readProofFromTerminal,
  readSecretFromStdin,
} from './secret-input.js';

interface PassphraseOptions extends CommonOptions {
  passphraseFile?: string;
}
interface AddOptions extends PassphraseOptions {
  kind: string;
  header?: string;
  template?: string;
  param?: string;
  bind: string[];
  fromStdin?: boolean;
  keyPassphraseFile?: string;
}
interface RotateOptions extends PassphraseOptions {
  fromStdin?: boolean;
  keyPassphraseFile?: string;
}
interface ListOptions extends CommonOptions {
  json?: boolean;
}

/**
 * `postern vault init|unlock|lock|add|rotate|bind|list|remove`. Secrets come from stdin or the
 * terminal, passphrases from a file or the terminal; no option ever takes a secret value, and
 * nothing printed ever contains one. add/rotate/list/remove work on vault.sqlite directly (SQLite
 * serializes them with a running daemon, which re-reads metadata on every use); unlock/lock reach
 * the daemon's in-memory vault through its control socket.
 */
// eslint-disable-next-line max-lines-per-function -- flat commander registrations, one short block per subcommand
export function registerVaultCommands(program: Command, context: CommandContext): void {
  const { env, io } = context;
  const vault = program
    .command('vault')
    .description('The encrypted credential vault: create, unlock, lock, add, rotate, bind, list, remove.');

  withPassphraseFile(
    withDataDir(vault.command('init').description('Create the vault (asks for a new passphrase).')),
  ).action(async (options: PassphraseOptions) => {
    const dataDir = prepareDataDir(options, env);
    const passphrase = await readPassphrase({ file: options.passphraseFile, env }, 'New vault passphrase', {
      confirm: true,
    });
    let firstUse: FirstUseAtCreation;
    try {
      firstUse = await withVault(dataDir, async (v) => {
        await v.init(passphrase);
        // A person creating the vault is the one moment a configuration is trusted on first use (docs/config.md).
        const { sealConfigAtVaultCreation } = await import('../host/config-integrity.js');
        return sealConfigAtVaultCreation({ dataDir, vault: v, clock: systemClock, env });
      });
    } finally {
      passphrase.fill(0);
    }
    io.out(
      `Vault created: ${dataDir}/vault.sqlite. It stays locked except inside a running broker (postern vault unlock).`,
    );
    io.out(firstUseLine(firstUse));
  });

  withPassphraseFile(
    withDataDir(
      vault
        .command('unlock')
        .description("Unlock the running daemon's vault (or check the passphrase when none runs)."),
    ),
  ).action(async (options: PassphraseOptions) => {
    const dataDir = existingDataDir(options, env);
    const source = { file: options.passphraseFile, env };
    const passphrase = await readPassphrase(source, 'Vault passphrase');
    // Read from a file: the broker is told, and from then on takes no passphrase as a person's proof (docs/vault.md).
    const fromFile = passphraseFileNamed(source) !== undefined;
    try {
      const reply = await askDaemon(dataDir, {
        op: 'unlock',
        passphrase: passphrase.toString('utf8'),
        ...(fromFile ? { source: 'file' as const } : {}),
      });
      if (reply !== undefined) {
        valueOf(reply);
        io.out('Vault unlocked in the running broker.');
        return;
      }
      await withVault(dataDir, (v) => v.unlock(passphrase));
      io.out('The passphrase is correct. No broker is running for this data directory, so nothing stays unlocked.');
    } finally {
      passphrase.fill(0);
    }
  });

  withDataDir(vault.command('lock').description("Lock the running daemon's vault now (drops its keys).")).action(
    async (options: CommonOptions) => {
      const dataDir = existingDataDir(options, env);
      let reply = await askDaemon(dataDir, { op: 'lock' });
      if (reply === undefined) {
        io.out(
          'No broker is running for this data directory; the vault is locked (it is only ever unlocked inside a running broker).',
        );
        return;
      }
      // Locking is a decision (an agent must not stop every dispatch at will): prove it on the terminal.
      // Unless no passphrase can prove a person to this broker (`proof_refusal`): then the refusal is the answer.
      if (!reply.ok && reply.error.code === 'OPERATOR_PROOF_REQUIRED' && reply.error.proof_refusal === undefined) {
        const refusal = reply.error.message;
        const passphrase = await readProofFromTerminal(
          "Lock the running broker's vault. Vault passphrase: ",
          () =>
            new CodedError('OPERATOR_PROOF_REQUIRED', `${refusal} (this process has no terminal to ask on)`, {
              field: 'proof',
            }),
        );
        try {
          reply = await askDaemon(dataDir, { op: 'lock', proof: { passphrase: passphrase.toString('utf8') } });
        } finally {
          passphrase.fill(0);
        }
        if (reply === undefined)
          throw new CodedError('NOT_FOUND', 'the broker stopped before the vault was locked', { field: '--data-dir' });
      }
      valueOf(reply);
      io.out('Vault locked in the running broker.');
    },
  );

  withPassphraseFile(
    withDataDir(
      vault
        .command('add')
        .description('Add a credential; the secret is read from stdin (--from-stdin), never from the command line.')
        .argument('<name>', 'credential name (letters, digits, . _ -)')
        .addOption(
          new Option('--kind <kind>', 'what the secret is and how it is injected')
            .choices([...credentialKinds])
            .makeOptionMandatory(),
        )
        .option('--header <name>', 'kind header: the header to set')
        .option('--template <template>', 'kind header: the value, containing {secret} once (default {secret})')
        .option('--param <name>', 'kind query: the query parameter to set')
        .option(
          '--bind <host>',
          'a host (or route / host entry) this credential may be sent to; repeatable',
          collect,
          [],
        )
        .option('--from-stdin', 'read the secret from stdin (required: secrets never travel in argv)')
        .option(
          '--key-passphrase-file <file>',
          'kind ssh_key: a file holding the passphrase of an encrypted key (used once, not stored)',
        ),
    ),
  ).action(async (name: string, options: AddOptions) => {
    const dataDir = existingDataDir(options, env);
    requireStdin(options.fromStdin);
    const kind = options.kind as CredentialKind;
    const held: (Buffer | undefined)[] = [];
    try {
      const secret = await readSecretFromStdin({ keepNewline: kind === 'ssh_key' });
      held.push(secret);
      const keyPassphrase = passphraseFromFile({ file: options.keyPassphraseFile, env: {} }, '--key-passphrase-file');
      held.push(keyPassphrase);
      const passphrase = await readPassphrase({ file: options.passphraseFile, env }, 'Vault passphrase');
      held.push(passphrase);
      const info = await withUnlockedVault(dataDir, passphrase, (v) =>
        addOrSayRotate(name, () =>
          v.add({
            name,
            kind,
            secret,
            bindings: options.bind,
            ...(options.header === undefined ? {} : { header: options.header }),
            ...(options.template === undefined ? {} : { template: options.template }),
            ...(options.param === undefined ? {} : { param: options.param }),
            ...(keyPassphrase === undefined ? {} : { sshKeyPassphrase: keyPassphrase }),
          }),
        ),
      );
      io.out(`Added ${describeLine(info)}`);
    } finally {
      for (const bytes of held) bytes?.fill(0);
    }
  });

  withPassphraseFile(
    withDataDir(
      vault
        .command('rotate')
        .description("Replace a credential's secret (read from stdin); its version tag changes.")
        .argument('<name>', 'credential name')
        .option('--from-stdin', 'read the new secret from stdin (required)')
        .option('--key-passphrase-file <file>', 'kind ssh_key: a file holding the passphrase of an encrypted key'),
    ),
  ).action(async (name: string, options: RotateOptions) => {
    const dataDir = existingDataDir(options, env);
    requireStdin(options.fromStdin);
    const keepNewline = (await describeKind(dataDir, name)) === 'ssh_key';
    const held: (Buffer | undefined)[] = [];
    try {
      const secret = await readSecretFromStdin({ keepNewline });
      held.push(secret);
      const keyPassphrase = passphraseFromFile({ file: options.keyPassphraseFile, env: {} }, '--key-passphrase-file');
      held.push(keyPassphrase);
      const passphrase = await readPassphrase({ file: options.passphraseFile, env }, 'Vault passphrase');
      held.push(passphrase);
      const info = await withUnlockedVault(dataDir, passphrase, (v) =>
        v.rotate(name, secret, keyPassphrase === undefined ? {} : { sshKeyPassphrase: keyPassphrase }),
      );
      io.out(`Rotated ${describeLine(info)}`);
    } finally {
      for (const bytes of held) bytes?.fill(0);
    }
  });

  withPassphraseFile(
    withDataDir(
      vault
        .command('bind')
        .description("Replace a credential's bindings (where it may be sent); the secret is sealed again under them.")
        .argument('<name>', 'credential name')
        .option(
          '--bind <host>',
          'a host (or route / host entry) this credential may be sent to; repeatable; the list replaces the old one',
          collect,
          [],
        ),
    ),
  ).action(async (name: string, options: PassphraseOptions & { bind: string[] }) => {
    const dataDir = existingDataDir(options, env);
    if (options.bind.length === 0) {
      throw new CodedError(
        'INVALID_ARGUMENT',
        'name at least one host, route or SSH host entry with --bind (a credential bound to nothing is never sent)',
        { field: '--bind' },
      );
    }
    const passphrase = await readPassphrase({ file: options.passphraseFile, env }, 'Vault passphrase');
    try {
      const info = await withUnlockedVault(dataDir, passphrase, (v) => v.rebind(name, options.bind));
      io.out(`Rebound ${describeLine(info)}`);
    } finally {
      passphrase.fill(0);
    }
  });

  withDataDir(vault.command('list').description('List credentials: names, kinds, versions, bindings (never a secret).'))
    .option('--json', 'print one JSON object instead of text')
    .action(async (options: ListOptions) => {
      const dataDir = existingDataDir(options, env);
      // The file as it is, read-only: listing opens no vault (neither libsodium nor the SSH key parser loads).
      const { readVaultListing } = await import('../vault/vault-listing.js');
      const { state: fileState, credentials } = readVaultListing(dataDir);
      // This process never unlocks the file; what matters is whether a running broker holds it unlocked.
      const daemon = await askDaemon(dataDir, { op: 'vault_status' });
      const state = daemon?.ok === true ? daemon.value.state : fileState;
      const where = daemon?.ok === true ? 'in the running broker' : 'no broker running';
      if (options.json === true) {
        io.out(JSON.stringify({ state, broker_running: daemon?.ok === true, credentials }));
        return;
      }
      io.out(`Vault: ${state} (${where}), ${credentials.length} credential${credentials.length === 1 ? '' : 's'}`);
      for (const info of credentials) io.out(`  ${describeLine(info)}`);
    });

  // Removing takes capability away, but a credential change is a person's decision (issue 14): an agent that could
  // remove at will could stop every route, and the record would not say who did it.
  withPassphraseFile(
    withDataDir(
      vault
        .command('remove')
        .description("Remove a credential (needs the passphrase: a credential change is a person's decision).")
        .argument('<name>', 'credential name'),
    ),
  ).action(async (name: string, options: PassphraseOptions) => {
    const dataDir = existingDataDir(options, env);
    const passphrase = await readPassphrase({ file: options.passphraseFile, env }, 'Vault passphrase');
    try {
      await withUnlockedVault(dataDir, passphrase, (v) => v.remove(name));
    } finally {
      passphrase.fill(0);
    }
    io.out(`Removed ${name}.`);
  });
}

function withPassphraseFile(command: Command): Command {
  return command.option(
    '--passphrase-file <file>',
    'read the vault passphrase from this file (trailing newline dropped); else POSTERN_PASSPHRASE_FILE; else ask on the terminal',
  );
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function requireStdin(fromStdin: boolean | undefined): void {
  if (fromStdin !== true) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      'the secret is read only from stdin: pass --from-stdin and pipe it in (never as an argument)',
      { field: '--from-stdin' },
    );
  }
}

/** Metadata only: `name (kind, version v2-…, id cred_…) → host, host`. */
function describeLine(info: CredentialInfo): string {
  const extra = [
    info.header === undefined ? '' : `header ${info.header}`,
    info.param === undefined ? '' : `param ${info.param}`,
  ].filter((s) => s !== '');
  const bindings = info.bindings.length === 0 ? 'no bindings' : info.bindings.join(', ');
  return `${info.name} (${[info.kind, ...extra, `version ${info.version_tag}`, info.id].join(', ')}) → ${bindings}`;
}

/** Opens vault.sqlite for one command, maps field names to this command line's, and always closes it. */
/** What `postern vault init` says of the configuration it sealed (or did not) as the first-use one. */
function firstUseLine(firstUse: FirstUseAtCreation): string {
  if (!firstUse.sealed)
    return `${firstUse.file} was not trusted on first use: ${firstUse.reason}. Review it with \`postern config pending\`, then \`postern config accept\`.`;
  if (!firstUse.present)
    return `No ${firstUse.file} yet: a file written later is a change to accept (\`postern config pending\`, then \`postern config accept\`).`;
  return `${firstUse.file} trusted on first use (${firstUse.digest}): the configuration in force until a person accepts a change.`;
}

async function withVault<T>(dataDir: string, use: (vault: Vault) => Promise<T>): Promise<T> {
  // The vault (libsodium, SQLite) loads when a vault command runs, not when `postern` starts.
  const { openVault } = await import('../vault/index.js');
  const vault = await openVault({ dataDir, clock: systemClock, idleLockMs: 0 });
  try {
    return await use(vault);
  } catch (error) {
    throw withCliField(error);
  } finally {
    await vault.close();
  }
}

function withUnlockedVault<T>(dataDir: string, passphrase: Uint8Array, use: (vault: Vault) => Promise<T>): Promise<T> {
  return withVault(dataDir, async (vault) => {
    await vault.unlock(passphrase);
    return use(vault);
  });
}

async function describeKind(dataDir: string, name: string): Promise<CredentialKind | undefined> {
  return withVault(dataDir, (vault) => Promise.resolve(vault.describe(name)?.kind));
}

const cliFields: Record<string, string> = {
  passphrase: '--passphrase-file',
  secret: 'stdin',
  sshKeyPassphrase: '--key-passphrase-file',
  name: 'NAME',
  kind: '--kind',
  header: '--header',
  template: '--template',
  param: '--param',
  bindings: '--bind',
};

/** The vault names API fields (`sshKeyPassphrase`); the operator needs the flag to fix. No cause is kept. */
function withCliField(error: unknown): unknown {
  if (!isCodedError(error) || error.field === undefined) return error;
  const base = error.field.replace(/\[\d+\]$/, '');
  const field = cliFields[base];
  return field === undefined ? error : new CodedError(error.code, error.message, { field });
}

/** The daemon's reply, or undefined when no daemon listens on this data directory's control socket. */
async function askDaemon(
  dataDir: string,
  request: Exclude<ControlRequest, { op: 'api' }>,
): Promise<ControlReply | undefined> {
  // The client and its check of the listener load only for a command that asks the broker (it loads no schema).
  const { sendControlRequest } = await import('../host/control-client.js');
  try {
    return await sendControlRequest(controlSocketPath(dataDir), request);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') return undefined;
    throw error;
  }
}

function valueOf(reply: ControlReply): void {
  if (reply.ok) return;
  const code = isMember(ErrorCode, reply.error.code) ? reply.error.code : 'INTERNAL';
  throw withCliField(
    new CodedError(code, reply.error.message, reply.error.field === undefined ? {} : { field: reply.error.field }),
  );
}

/**
 * A name already taken is said with the command that replaces its secret: `vault add` never overwrites, and a person
 * who meant to change the secret should not have to look up how. The name passed the vault's name check to get here.
 */
async function addOrSayRotate(name: string, add: () => Promise<CredentialInfo>): Promise<CredentialInfo> {
  try {
    return await add();
  } catch (error) {
    if (!isCodedError(error) || error.code !== 'CREDENTIAL_EXISTS') throw error;
    throw new CodedError(
      'CREDENTIAL_EXISTS',
      `a credential named ${name} already exists; to replace its secret: postern vault rotate ${name} --from-stdin (or postern vault remove ${name} first)`,
      { field: 'name' },
    );
  }
}
