import path from 'node:path';
import type { Logger } from 'pino';
import { verifyJournal, type VerifyReport } from '../audit/verify-journal.js';
import {
  CodedError,
  configPendingSchema,
  configSubjectId,
  isCodedError,
  type AuditVerifyResult,
  type BrokerApi,
  type CredentialSummary,
  type RouteSummary,
  type SshHostSummary,
} from '../contract/index.js';
import { configFileName, type PosternConfig } from '../config/index.js';
import { journalFileName, vaultCheckpointKey, type Journal } from '../journal/index.js';
import type { Clock, CredentialInfo } from '../ports/index.js';
import type { Vault } from '../vault/index.js';
import { thisBrokerHookups } from './agent-hookup.js';
import type { ConfigApplied, ConfigIntegrity } from './config-integrity.js';
import { editConfigFile } from './edit-config-file.js';
import type { OperatorBroker } from './operator-broker.js';

type VaultMethods =
  | 'vault.status'
  | 'vault.init'
  | 'vault.unlock'
  | 'vault.lock'
  | 'agent.hookup'
  | 'credentials.list'
  | 'credentials.add'
  | 'credentials.remove'
  | 'audit.verify'
  | 'audit.last'
  | 'config.show'
  | 'config.edit'
  | 'config.pending'
  | 'config.accept';

export interface OperatorVaultDeps {
  dataDir: string;
  vault: Vault;
  config: PosternConfig;
  /** The gate on postern.yaml changes made outside Postern (config-integrity.ts); absent in tests that build a config by hand. */
  integrity?: ConfigIntegrity;
  /** Where a configuration applied without a restart is recorded (CONFIG_APPLIED); absent in tests without a journal. */
  journal?: Pick<Journal, 'appendConfig'>;
  clock: Clock;
  logger: Logger;
}

/**
 * The operator methods over the vault, the journal's integrity and the loaded configuration. The
 * secret a person types (a passphrase, a credential's value) becomes bytes that go into the vault
 * and are zeroed after; no reply, log line or journal event carries it (the JS string the request
 * arrived as cannot be zeroed and lives until collected, as on the control socket).
 */
// eslint-disable-next-line max-lines-per-function -- one handler per vault method, an object of closures over shared deps
export function createOperatorVault(deps: OperatorVaultDeps): Pick<OperatorBroker, VaultMethods> {
  const { vault, clock, logger } = deps;
  const dbPath = path.join(deps.dataDir, journalFileName);
  let last: AuditVerifyResult | null = null;
  let running: Promise<AuditVerifyResult> | undefined;
  let progress: { checked: number; total: number } | undefined;
  // The file the next start reads: the one loaded (or --config), else the data directory's default.
  const configFile = deps.config.file ?? path.join(deps.dataDir, configFileName);
  let editedSinceStart = false;

  /**
   * Journals a configuration that just went into force. Called in the same tick as the swap, so its CONFIG_APPLIED is
   * queued before any admission made under it: every ACTION_ACCEPTED after it in the log was admitted under it.
   */
  const recordApplied = async (applied: ConfigApplied | undefined): Promise<void> => {
    if (applied === undefined) return;
    // Everything accepted is in force now: nothing written by an edit waits for a start any more.
    editedSinceStart = false;
    if (deps.journal === undefined) return;
    try {
      await deps.journal.appendConfig({
        kind: 'CONFIG_APPLIED',
        action_id: configSubjectId(applied.digest),
        payload: applied,
      });
    } catch (error) {
      // In force already (and sealed); a journal that cannot append has stopped dispatching, so the person hears it.
      logger.error(
        { code: isCodedError(error) ? error.code : 'INTERNAL' },
        'the applied configuration could not be journaled',
      );
      throw error;
    }
  };

  /**
   * One verification at a time: a click while one runs gets that run's result. The rows and signatures are checked on
   * worker threads at a lower CPU priority and the rest yields often (verify-journal.ts), so the loop keeps answering;
   * audit.last shows progress.
   * With the vault unlocked the journal's checkpoint key must be the vault's (`key_source: 'vault'`); locked, the
   * result says the key was only the journal's own claim (`key_source: 'journal'`).
   */
  const verify = (): Promise<AuditVerifyResult> => {
    running ??= (async () => {
      try {
        progress = { checked: 0, total: 0 };
        const trusted = await vaultKeyForVerify(dbPath, vault);
        const report: VerifyReport | Refusal =
          'code' in trusted
            ? { ok: false, ...trusted, seq: null }
            : await verifyJournal({
                dbPath,
                ...(trusted.key === undefined ? {} : { trustedKey: trusted.key }),
                onProgress: (checked, total) => (progress = { checked, total }),
                background: true,
              });
        const checkedAtMs = clock.nowMs();
        last = report.ok
          ? {
              ok: true,
              checked_at_ms: checkedAtMs,
              events: report.events,
              root: report.root,
              checkpoints: report.checkpoints,
              last_checkpoint_size: report.last_checkpoint_size,
              unsigned_tail: report.unsigned_tail,
              key_source: report.key_source === 'vault' ? 'vault' : 'journal',
            }
          : { ok: false, checked_at_ms: checkedAtMs, code: report.code, seq: report.seq, message: report.message };
        // Closed-set values and positions only; the report carries no event content.
        logger.info(
          {
            ok: report.ok,
            code: report.ok ? undefined : report.code,
            seq: report.ok ? undefined : report.seq,
            key_source: report.ok ? report.key_source : undefined,
          },
          'audit verify (operator)',
        );
        return last;
      } finally {
        running = undefined;
        progress = undefined;
      }
    })();
    return running;
  };

  return {
    'vault.status': () => ({ state: vault.state(), credentials: vault.list().length }),
    // The control socket never gets here (contract controlSocketRefusedMethods). The new vault is unlocked, and a
    // person's creation of it is the one moment the configuration loaded at start is trusted on first use
    // (config-integrity.ts createVault), as `postern vault init` seals the file present at a terminal.
    'vault.init': async (input) => {
      const passphrase = Buffer.from(input.passphrase, 'utf8');
      try {
        const init = (): Promise<void> => vault.init(passphrase);
        await (deps.integrity === undefined ? init() : deps.integrity.createVault(init));
      } finally {
        passphrase.fill(0);
      }
      logger.info('vault created (operator)');
      return { state: vault.state() };
    },
    'vault.unlock': async (input) => {
      const passphrase = Buffer.from(input.passphrase, 'utf8');
      try {
        await vault.unlock(passphrase);
      } finally {
        passphrase.fill(0);
      }
      logger.info('vault unlocked (operator)');
      return { state: vault.state() };
    },
    'vault.lock': () => {
      // Announced once, with its reason, by the runtime's lock listener (vault-announcements.ts).
      vault.lock('operator');
      return { state: vault.state() };
    },
    'agent.hookup': () => thisBrokerHookups(deps.dataDir),
    'credentials.list': () => ({ state: vault.state(), credentials: vault.list().map(summary) }),
    'credentials.add': async (input) => summary(await addCredential(vault, logger, input)),
    'credentials.remove': async (input) => {
      await vault.remove(input.name);
      logger.info('credential removed (operator)');
      return { name: input.name, removed: true as const };
    },
    'audit.verify': () => verify(),
    'audit.last': () => (progress === undefined ? { last } : { last, progress }),
    'config.show': () => ({ ...showConfig(deps.config, vault.list()), edited_since_start: editedSinceStart }),
    'config.edit': async (input, actor) => {
      if (input.op === 'add_route') refuseNameOnlyBinding(input.route, vault.list());
      if (input.op === 'add_ssh_host') refuseNameOnlyHostBinding(input.host, vault.list());
      const integrity = deps.integrity;
      // The edit builds on the file as it is: a change no person accepted would ride along into the accepted copy.
      const { text, ...edited } = editConfigFile(
        configFile,
        input,
        integrity === undefined ? {} : { checkBase: (base) => integrity.assertNothingPending(base) },
      );
      // A person's edit from an operator surface is that person's acceptance of the result.
      const applied = integrity?.edited(text, actor);
      if (applied === undefined) {
        editedSinceStart = true;
        logger.info({ op: input.op }, 'configuration file edited (operator); applies at the next start');
        return { ...edited, applies: 'next_start' as const };
      }
      await recordApplied(applied);
      logger.info({ op: input.op }, 'configuration file edited (operator); in force now');
      return { ...edited, applies: 'now' as const, restart_needed_for: applied.restart_needed_for };
    },
    'config.pending': () => pendingAsContracted(requireIntegrity(deps).pending(), logger),
    'config.accept': async (input, actor) => {
      const { applied, ...accepted } = requireIntegrity(deps).accept(input.digest, actor);
      await recordApplied(applied);
      return accepted;
    },
  };
}

/**
 * Adds a credential a person typed into a form: the one path for credentials.add and for provisioning an agent's
 * credential request. The secret becomes bytes for the vault, zeroed after; the log names the id, kind and tag only.
 */
export async function addCredential(
  vault: Vault,
  logger: Logger,
  input: BrokerApi['credentials.add']['input'],
): Promise<CredentialInfo> {
  const secret = Buffer.from(input.secret, 'utf8');
  try {
    const info = await vault.add({
      name: input.name,
      kind: input.kind,
      secret,
      bindings: input.bindings,
      ...(input.header === undefined ? {} : { header: input.header }),
      ...(input.template === undefined ? {} : { template: input.template }),
      ...(input.param === undefined ? {} : { param: input.param }),
    });
    vault.touch();
    logger.info(
      { credential_id: info.id, kind: info.kind, version_tag: info.version_tag },
      'credential added (operator)',
    );
    return info;
  } finally {
    secret.fill(0);
  }
}

/** A verify that could not start: the vault's key could not be derived (a CodedError's code and message). */
interface Refusal {
  readonly ok: false;
  readonly code: string;
  readonly seq: null;
  readonly message: string;
}

/**
 * The key "Verify now" checks the journal's signatures under. Unlocked: the vault's checkpoint key, unwrapped from the
 * journal's wrapped audit signing secret (vault-checkpoint-key.ts), as `audit verify --check-key` does; a journal
 * key that is not it is then KEY_MISMATCH. A wrapped secret the vault cannot open (VAULT_CORRUPT) or an absent key
 * row (AUDIT_KEY_UNAVAILABLE: the broker made one at the first unlock) is a failed verify under those codes, as the
 * CLI refuses. Locked or never created (or locked meanwhile): no key, and the result says so.
 */
async function vaultKeyForVerify(
  dbPath: string,
  vault: Vault,
): Promise<{ key: Uint8Array | undefined } | Omit<Refusal, 'ok' | 'seq'>> {
  if (vault.state() !== 'unlocked') return { key: undefined };
  try {
    const key = await vaultCheckpointKey(dbPath, vault);
    if (key !== undefined) return { key };
    return {
      code: 'AUDIT_KEY_UNAVAILABLE',
      message:
        "the vault is unlocked but the journal holds no audit key (audit_keys has no row): its checkpoints cannot be checked against the vault's key",
    };
  } catch (error) {
    if (isCodedError(error) && error.code === 'VAULT_LOCKED') return { key: undefined };
    if (isCodedError(error)) return { code: error.code, message: error.message };
    return { code: 'DB_UNREADABLE', message: `cannot read the journal: ${(error as Error).message}` };
  }
}

function requireIntegrity(deps: OperatorVaultDeps): ConfigIntegrity {
  if (deps.integrity === undefined)
    throw new CodedError('UNSUPPORTED_ACTION', 'this broker was built without a configuration gate', { field: '' });
  return deps.integrity;
}

/**
 * A credential may be bound to a route by its name alone (broker/queue checks name or host). A new
 * route under such a name would let that credential reach the new route's host, which the person
 * who bound it never named: the API refuses it (bind the credential to the host too, or write the
 * route in the file by hand, where the same user already decides everything).
 */
function refuseNameOnlyBinding(
  route: { name: string; base_url: string },
  credentials: readonly CredentialInfo[],
): void {
  let url: URL;
  try {
    url = new URL(route.base_url);
  } catch {
    return; // The schema check that follows refuses it, naming the field.
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const hostBound = (binding: string): boolean =>
    binding === host ||
    binding === `${host}:${port}` ||
    binding === `[${host}]:${port}` ||
    (binding.startsWith('*.') && host.endsWith(binding.slice(1)) && host.length > binding.length - 1);
  const widened = credentials.find(
    (info) =>
      info.bindings.some((b) => b.toLowerCase() === route.name) &&
      !info.bindings.some((b) => hostBound(b.toLowerCase())),
  );
  if (widened !== undefined) {
    throw new CodedError(
      'CONFIG_INVALID',
      `a credential is bound to the route name "${route.name}" but not to ${host}: bind it to that host first, or edit the file by hand`,
      {
        field: 'route.name',
      },
    );
  }
}

/**
 * The same for an SSH host entry: an SSH key bound to the entry's name alone would authenticate to
 * whatever host a new entry of that name points at (execute-ssh-action accepts the name as a
 * binding). Refused unless the key is also bound to the new host.
 */
function refuseNameOnlyHostBinding(
  entry: { name: string; host: string; port?: number | undefined },
  credentials: readonly CredentialInfo[],
): void {
  const host = entry.host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = entry.port ?? 22;
  const names = [host, `${host}:${port}`, `[${host}]:${port}`];
  const widened = credentials.find(
    (info) =>
      info.bindings.some((b) => b.toLowerCase() === entry.name) &&
      !info.bindings.some((b) => names.includes(b.toLowerCase())),
  );
  if (widened !== undefined) {
    throw new CodedError(
      'CONFIG_INVALID',
      `a credential is bound to the SSH host name "${entry.name}" but not to ${host}: bind it to that host first, or edit the file by hand`,
      {
        field: 'host.name',
      },
    );
  }
}

/** Metadata only, field by field (never a spread of whatever the vault returns). */
export function summary(info: CredentialInfo): CredentialSummary {
  return {
    id: info.id,
    name: info.name,
    kind: info.kind,
    version_tag: info.version_tag,
    bindings: [...info.bindings],
    ...(info.header === undefined ? {} : { header: info.header }),
    ...(info.param === undefined ? {} : { param: info.param }),
    ...(info.template === undefined ? {} : { template: info.template }),
  };
}

/**
 * The configuration as loaded at start; credentials appear by name only (config never holds a secret),
 * flagged when the vault holds none of that name (`credentials`: the vault's metadata, readable while locked).
 */
export function showConfig(
  config: PosternConfig,
  credentials: readonly CredentialInfo[],
): Omit<BrokerApi['config.show']['output'], 'edited_since_start'> {
  const held = new Set(credentials.map((info) => info.name));
  const routes: RouteSummary[] = [...config.routes.values()].map((route) => ({
    name: route.name,
    base_url: route.base_url,
    credential: route.credential,
    injection: route.injection,
    approval: route.approval,
    methods: [...route.methods],
    lanes: route.lanes.map((rule) => ({ methods: [...rule.methods], path: rule.path, lane: rule.lane })),
    idempotency_header: route.idempotency?.header ?? null,
    lookup: route.lookup === undefined ? null : `${route.lookup.method} ${route.lookup.path}`,
    retry_automatic: route.retry?.automatic ?? false,
    tls_pinned: (route.tls?.pins?.length ?? 0) > 0,
    credential_missing: !held.has(route.credential),
  }));
  const sshHosts: SshHostSummary[] = [...config.sshHosts.values()].map((host) => ({
    name: host.name,
    host: host.host,
    port: host.port,
    user: host.user,
    credential: host.credential,
    host_key: host.host_key === 'accept_new' ? 'accept_new' : `pinned (${host.host_key.pinned.length})`,
    approval: host.approval,
    lane: host.lane ?? null,
    commands: host.commands.length,
    credential_missing: !held.has(host.credential),
  }));
  return { file: config.file ?? null, routes, ssh_hosts: sshHosts };
}

/**
 * config.pending's answer as its contract says it, parsed on the way out whatever surface asks (control socket, web,
 * desktop): a field the schema does not name is stripped at every level, so one a later change dropped from the
 * contract never reaches a client; an answer that does not fit it (a bug) is not sent, INTERNAL, and logged by the
 * path and kind of each issue only (never a value: the card carries the file's text).
 */
function pendingAsContracted(pending: unknown, logger: Logger): BrokerApi['config.pending']['output'] {
  const parsed = configPendingSchema.safeParse(pending);
  if (parsed.success) return parsed.data;
  logger.error(
    { issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.map(String).join('.'), code: i.code })) },
    'config.pending: the answer does not fit its contract; not sent',
  );
  throw new CodedError('INTERNAL', 'The broker failed to answer config.pending; see its log.');
}
