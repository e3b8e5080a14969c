import type { Command } from 'commander';
import type { ConfigEntryChange, ConfigPending } from '../contract/index.js';
import { CodedError, isCodedError } from '../contract/coded-error.js';
import { systemClock } from '../ports/system-clock.js';
import { existingDataDir, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { callOperator, printable } from './operator-commands.js';
import { readProofFromTerminal } from './secret-input.js';

interface JsonOptions extends CommonOptions {
  json?: boolean;
}

/**
 * `postern config pending|accept`: postern.yaml against the configuration a person last accepted
 * (docs/config.md). With a broker running both go through its control socket (accept is a decision:
 * the passphrase typed on this terminal); with none, pending is read from the files and accept seals
 * the file with the vault unlocked by the passphrase typed here — never from a file or the
 * environment, since the record names a person.
 */
export function registerConfigCommands(program: Command, context: CommandContext): void {
  const { env } = context;
  const io = { out: (line: string) => context.io.out(printable(line)) };
  const config = program
    .command('config')
    .description('postern.yaml against the configuration a person last accepted: see the change, accept it.');

  withDataDir(
    config
      .command('pending')
      .description('What postern.yaml changed since a person last accepted it, and the digest to accept.'),
  )
    .option('--json', 'print one JSON object')
    .action(async (options: JsonOptions) => {
      const dataDir = existingDataDir(options, env);
      const running = await ifBrokerRuns(() => callOperator(dataDir, 'config.pending', {}));
      const pending = running ?? (await pendingFromFiles(dataDir));
      if (options.json === true) return io.out(JSON.stringify({ broker_running: running !== undefined, ...pending }));
      for (const line of pendingLines(pending, running !== undefined)) io.out(line);
    });

  withDataDir(
    config
      .command('accept')
      .argument('<digest>', 'the digest `postern config pending` showed (sha256: and 64 hex digits)')
      .description(
        'Accept postern.yaml as it is now (named by its digest): a decision, proven by the vault passphrase typed on this terminal.',
      ),
  ).action(async (digest: string, options: CommonOptions) => {
    const dataDir = existingDataDir(options, env);
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) {
      throw new CodedError(
        'INVALID_ARGUMENT',
        'must be the digest `postern config pending` showed: sha256: and 64 hex digits',
        { field: 'digest' },
      );
    }
    const running = await ifBrokerRuns(() =>
      callOperator(dataDir, 'config.accept', { digest }, { proveOnTerminal: true }),
    );
    if (running !== undefined) {
      io.out(
        running.applies === 'now'
          ? `Accepted ${digest}; it is in force now.`
          : `Accepted ${digest}; it applies when the broker is restarted.`,
      );
      return;
    }
    const accepted = await acceptOffline(dataDir, digest);
    io.out(`Accepted ${accepted.digest} (${accepted.file}); no broker is running, so it applies at the next start.`);
  });
}

/** The running broker's answer, or undefined when none runs for the data directory. */
async function ifBrokerRuns<T>(call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call();
  } catch (error) {
    if (isCodedError(error) && error.code === 'NOT_FOUND' && error.field === '--data-dir') return undefined;
    throw error;
  }
}

/**
 * No broker: the card from the files (the accepted copy's seal is checked only by an unlock, so trust reads unverified).
 * The card needs only whether a vault was created, read from the vault file's key row without opening the vault
 * (opening it loads libsodium and the key parser, and creates `vault.sqlite` where there is none: issue 18's cold
 * start). A vault file of an older schema is opened as before, which upgrades it.
 */
async function pendingFromFiles(dataDir: string): Promise<ConfigPending> {
  // With no broker running, the broker's own pieces do the work; they load only for this path.
  const [listing, { lockedVaultView }, { loadConfigIntegrity, dataDirHistoryFromFiles }] = await Promise.all([
    import('../vault/vault-listing.js'),
    import('../vault/locked-vault-view.js'),
    import('../host/config-integrity.js'),
  ]);
  const integrity = loadConfigIntegrity({ dataDir, clock: systemClock });
  const history = dataDirHistoryFromFiles(dataDir);
  let state: 'uninitialized' | 'locked';
  try {
    state = listing.readVaultState(dataDir);
  } catch (error) {
    if (!(error instanceof listing.OlderVaultSchema)) throw error;
    const { openVault } = await import('../vault/index.js');
    const vault = await openVault({ dataDir, clock: systemClock, idleLockMs: 0 });
    try {
      integrity.attach(vault, history);
      return integrity.pending();
    } finally {
      await vault.close();
    }
  }
  integrity.attach(
    lockedVaultView(state, () => listing.readVaultListing(dataDir).credentials),
    history,
  );
  return integrity.pending();
}

/**
 * No broker: a person accepts at this terminal. The prompt comes first and the vault opens while they type (libsodium's
 * wasm and the key parser take a few hundred ms to load); a directory with no vault file, or an empty one, is refused
 * before anything is asked or created. Any other file is the vault's to judge when it opens (an older schema is
 * upgraded, one with no key is refused by the unlock).
 */
async function acceptOffline(dataDir: string, digest: string): Promise<{ digest: string; file: string }> {
  const { vaultFileHoldsData } = await import('../vault/vault-listing.js');
  if (!vaultFileHoldsData(dataDir))
    throw new CodedError('VAULT_NOT_INITIALIZED', 'the vault has not been created; run `postern vault init`', {
      field: '',
    });
  const opening = openForAccept(dataDir);
  // Its failure is answered where it is awaited, after the prompt; until then it must not count as unhandled.
  opening.catch(() => undefined);
  let passphrase: Buffer;
  try {
    passphrase = await readProofFromTerminal(
      `Postern decision: config.accept, digest ${digest} (no broker running)\r\nType the vault passphrase to confirm it is you: `,
      () =>
        new CodedError(
          'OPERATOR_PROOF_REQUIRED',
          'config.accept is a decision and needs a person: run it in a terminal (it asks for the vault passphrase there)',
          { field: 'proof' },
        ),
    );
  } catch (error) {
    await opening.then(
      ({ vault }) => vault.close(),
      () => undefined,
    );
    throw error;
  }
  let opened: Awaited<typeof opening>;
  try {
    opened = await opening;
  } catch (error) {
    passphrase.fill(0);
    throw error;
  }
  const { vault, acceptConfigFile, operatorName } = opened;
  try {
    try {
      await vault.unlock(passphrase);
    } finally {
      passphrase.fill(0);
    }
    const actor = { kind: 'person', id: operatorName(), surface: 'cli', auth: 'vault_passphrase_tty' } as const;
    return acceptConfigFile({ dataDir, vault, clock: systemClock, actor, digest });
  } finally {
    await vault.close();
  }
}

async function openForAccept(dataDir: string) {
  const [{ openVault }, { acceptConfigFile }, { operatorName }] = await Promise.all([
    import('../vault/index.js'),
    import('../host/config-integrity.js'),
    import('../host/operator-handlers.js'),
  ]);
  const vault = await openVault({ dataDir, clock: systemClock, idleLockMs: 0 });
  return { vault, acceptConfigFile, operatorName };
}

function pendingLines(p: ConfigPending, running: boolean): string[] {
  const lines = [
    `Configuration trust: ${p.trust}${running ? '' : ' (no broker running: the seal is checked when a broker unlocks the vault)'}`,
  ];
  if (p.untrusted_reason !== null) lines.push(`  ${p.untrusted_reason}`);
  const unverified = p.trust === 'unverified';
  if (unverified)
    lines.push(
      'The last accepted copy is UNVERIFIED: its seal needs the vault key, and anyone who can write the data directory can write one. What it says is a claim, and the card below shows the WHOLE file, not a difference.',
    );
  if (p.accepted !== null)
    lines.push(
      `${unverified ? 'Claimed by the unverified copy: last accepted' : 'Last accepted'} ${new Date(p.accepted.at_ms).toISOString()} by ${p.accepted.by} (${p.accepted.how}), ${p.accepted.digest}`,
    );
  if (p.restart_needed) lines.push('An accepted change applies when the broker is restarted.');
  const change = p.change;
  if (change === null) {
    lines.push('postern.yaml is the accepted configuration: nothing to accept.');
    return lines;
  }
  lines.push(
    unverified || (p.trust === 'untrusted' && p.accepted === null)
      ? `${change.file}, the whole file, as nothing verified was accepted before it (digest ${change.digest}):`
      : `${change.file} differs from the accepted configuration (digest ${change.digest}):`,
  );
  if (change.invalid !== null) {
    lines.push(
      `  ${change.invalid.code}${change.invalid.field === null || change.invalid.field === '' ? '' : ` ${change.invalid.field}`}: ${change.invalid.message} (fix the file first)`,
    );
    return lines;
  }
  for (const [title, entries] of [
    ['route', change.routes],
    ['ssh host', change.ssh_hosts],
    ['mcp server', change.mcp_servers],
    ['setting', change.settings],
  ] as const) {
    for (const entry of entries) lines.push(...entryLines(title, entry));
  }
  if (change.routes.length + change.ssh_hosts.length + change.mcp_servers.length + change.settings.length === 0)
    lines.push('  no route, host or setting differs (only formatting or comments)');
  // With no broker running an acceptance is sealed in the files and read at the next start, whatever the card says.
  const when = running && p.accept_applies === 'now' ? 'it is in force at once' : 'it applies at the next start';
  lines.push(`Accept it with: postern config accept ${change.digest}  (${when})`);
  return lines;
}

function entryLines(title: string, entry: ConfigEntryChange): string[] {
  const head = `  ${entry.change} ${title} ${entry.name}`;
  return [
    head,
    ...entry.fields.flatMap((f) => [
      `    ${f.field}: ${f.before ?? '-'} → ${f.after ?? '-'}`,
      ...(f.note === undefined ? [] : [`      note: ${f.note}`]),
    ]),
  ];
}
