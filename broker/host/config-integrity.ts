import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AgentRefusal, AgentToolName } from '../contract/agent-api.js';
import { CodedError, isCodedError } from '../contract/coded-error.js';
import {
  configAcceptedByCharsMax,
  configInvalidMessageCharsMax,
  type StartBoundConfigSetting,
} from '../contract/config-constants.js';
import type { EventPayload } from '../contract/events.js';
import { actorLabel } from '../contract/operator-actor.js';
import type { ConfigPending } from '../contract/operator-vault-api.js';
import {
  configBytesMax,
  configFileName,
  cutToChars,
  diffConfigs,
  emptyConfig,
  parseConfig,
  readConfigText,
  type PosternConfig,
} from '../config/index.js';
import type { Clock, CredentialVault, OperatorActor, ToolAnswer } from '../ports/index.js';
import { readJournalSnapshot } from '../journal/read-snapshot.js';
import { anchorFileOf, readAnchorFile } from './integrity-anchor.js';
import { createLiveConfig, type LiveConfig } from './live-config.js';
import { writeAtomically } from './write-atomically.js';

/** The last accepted configuration lives here, beside the journal: `<dataDir>/config/accepted.json`. */
export const acceptedConfigDirName = 'config';
export const acceptedConfigFileName = 'accepted.json';
/** JSON escapes can grow the text; anything far past the config bound is not ours. */
const acceptedBytesMax = 8 * configBytesMax;
/** The vault wraps each acceptance's MAC key under this purpose (associated data). */
const macKeyPurpose = 'config-accepted-mac';
const macDomain = 'postern-config-accepted:v1';
const macKeyBytes = 32;

export type ConfigTrust = ConfigPending['trust'];
type AcceptedHow = 'first_use' | 'accepted' | 'edited';
/** A configuration a person accepted went into force in this run: the CONFIG_APPLIED payload the caller journals. */
export type ConfigApplied = EventPayload<'CONFIG_APPLIED'>;

/** The accepted copy on disk: the exact text a person accepted, who and when, and its MAC. */
interface AcceptedRecord {
  readonly version: 1;
  readonly text: string;
  readonly accepted_at_ms: number;
  readonly accepted_by: string;
  readonly how: AcceptedHow;
  /** A fresh HMAC key per acceptance, sealed by the vault (base64): only an unlocked vault can check or forge. */
  readonly key: string;
  /** HMAC-SHA256 (hex) over the domain, text, time, actor and how. */
  readonly mac: string;
}

/** What config.accept answers. */
export interface Accepted {
  readonly digest: string;
  readonly applies: 'now' | 'next_start';
  /** With `now`: changed settings read only at start (they wait for the next start). */
  readonly restart_needed_for?: StartBoundConfigSetting[];
}

/** The last accepted configuration as this run knows it (possibly not yet sealed: the vault was locked). */
interface Latest {
  readonly text: string;
  readonly config: PosternConfig;
  readonly meta: { at_ms: number; by: string; how: AcceptedHow } | null;
}

/**
 * What the data directory's own history says: the journal and its integrity anchor outside the data directory. An agent
 * can delete both (and roll back every file), so history never makes a missing accepted copy first use: only a
 * person creating the vault does (`createVault`, sealConfigAtVaultCreation). It names why a directory ran before on
 * the card, refuses first use even at a creation in a directory that ran before, and decides whether a first-use copy
 * sealed at a `postern vault init` is journaled at this run's first unlock (a new directory's first run).
 */
export interface DataDirHistory {
  /** Why this data directory has run before (shown on the card), or null when neither journal nor anchor says so. */
  readonly earlierRun: string | null;
  /** Journals a first-use seal (CONFIG_APPLIED, how first_use, with its digest); absent where no journal is open. */
  readonly recordFirstUse?: (applied: ConfigApplied) => void;
}

export interface ConfigIntegrityOptions {
  readonly dataDir: string;
  /** `--config FILE`; defaults to <dataDir>/postern.yaml. */
  readonly file?: string;
  readonly clock: Clock;
  readonly logger?: Logger;
}

/**
 * postern.yaml is a file the agent can write (THREAT-MODEL: same user). A change made outside
 * Postern is never applied by itself: the broker runs on the last configuration a person accepted,
 * kept in <dataDir>/config/accepted.json with a MAC under a key the vault wraps, and shows the
 * difference as a card a person accepts (in force at once while the configuration is verified, else
 * at the next start). Trust on first use happens only when a person creates the vault: the file present then is
 * sealed at that moment (journaled), unless it turns on the unattended opt-out or the directory ran before. Every
 * later start of an existing vault with no accepted copy — whatever the journal, anchor or vault rows look like, since
 * an agent can roll each back — makes the whole file a card, and nothing is sent until a person accepts it (then it
 * applies at once). An accepted copy that fails its MAC
 * refuses every route and host (CONFIG_UNTRUSTED) until a person accepts a configuration again.
 */
export interface ConfigIntegrity {
  /**
   * The configuration in force: the accepted copy, or the file on first use, then whatever a person accepts or edits
   * while it is verified (live-config.ts: getters, swapped in one step).
   */
  readonly config: LiveConfig;
  trust(): ConfigTrust;
  /**
   * Verifies at every unlock of `vault`, and now if it is already unlocked. With no accepted copy, first use stays
   * possible only while the vault does not exist yet (it is sealed by `createVault`); else the file waits for a person.
   */
  attach(vault: CredentialVault, history: DataDirHistory): void;
  /**
   * A person creates the vault in this broker (operator `vault.init`): `init` creates and unlocks it, and that unlock
   * seals the configuration loaded at start as first use (journaled), unless it turns on the unattended opt-out.
   */
  createVault(init: () => Promise<void>): Promise<void>;
  /** The card: the file as it is now against the last accepted configuration. */
  pending(): ConfigPending;
  /**
   * A person accepts the file whose digest the card showed. In force at once (`applied`: journal it) while the
   * configuration is verified, or for a first acceptance of the file in force; else at the next start.
   */
  accept(digest: string, actor: OperatorActor): Accepted & { applied?: ConfigApplied };
  /** For config.edit: throws CONFIG_PENDING when `text` (the file as read for the edit) holds an unaccepted change. */
  assertNothingPending(text: string): void;
  /** config.edit wrote `text`: a person's edit is that person's acceptance; in force at once (`applied`) when verified and unlocked. */
  edited(text: string, actor: OperatorActor): ConfigApplied | undefined;
  /** The agent's answer while the configuration is untrusted (undefined: go on). */
  agentRefusal(tool: AgentToolName | 'mcp_tool'): ToolAnswer | undefined;
  /** The vault as the executors see it: locked while the configuration is untrusted. */
  guardVault(vault: CredentialVault): CredentialVault;
}

/**
 * Reads the file (a bad one refuses the start with CONFIG_INVALID, as before) and the accepted
 * copy, and decides what is in force. No vault yet: the MAC is checked at `attach`/unlock, and
 * nothing can be dispatched before that (every route and host needs a credential).
 */
// eslint-disable-next-line max-lines-per-function -- returns one object of closures over the file, the accepted copy and the pending change
export function loadConfigIntegrity(options: ConfigIntegrityOptions): ConfigIntegrity {
  const logger = options.logger;
  const readOptions = { dataDir: options.dataDir, ...(options.file === undefined ? {} : { file: options.file }) };
  const start = readConfigText(readOptions);
  const fileConfig = start.text === undefined ? emptyConfig() : parseConfig(start.text, start.file);
  const acceptedFile = path.join(options.dataDir, acceptedConfigDirName, acceptedConfigFileName);
  const stored = readAcceptedRecord(acceptedFile);

  let trust: ConfigTrust;
  let untrustedReason: string | null = null;
  let inForce: PosternConfig;
  let inForceText: string;
  let latest: Latest;
  /** Accepted by a person (or on first use) while locked: sealed at the next unlock. */
  let unsealed: { text: string; by: string; how: AcceptedHow } | undefined;
  let acceptedThisRun = false;
  /**
   * No accepted copy, yet the vault holds credentials: the copy was deleted (or credentials came before the first
   * start). First use would let whoever wrote the file decide where those secrets go, so nothing is sent until a
   * person accepts the file as it was loaded; that acceptance applies at once (it is the configuration in force).
   */
  let awaitingFirstAcceptance = false;
  let vault: CredentialVault | undefined;
  let history: DataDirHistory = { earlierRun: null };
  /** A person is creating the vault in this broker (createVault): the unlock it ends with may seal first use. */
  let creatingVault = false;

  /** No configuration a person accepted, and first use does not hold: the loaded file is a card for a person. */
  const awaitFirstAcceptance = (reason: string): void => {
    trust = 'untrusted';
    awaitingFirstAcceptance = true;
    untrustedReason = reason;
    unsealed = undefined;
    logger?.warn({ reason }, 'no accepted configuration: every route is refused until a person accepts postern.yaml');
  };

  if (stored.kind === 'none') {
    trust = 'first_use';
    inForce = fileConfig;
    inForceText = start.text ?? '';
    latest = { text: inForceText, config: fileConfig, meta: null };
    unsealed = { text: inForceText, by: 'trust on first use', how: 'first_use' };
  } else {
    // The empty configuration accepted while there is still no file (sealed when the vault was created with none) is
    // "no file", as a missing file is on its own.
    const noFileYet = stored.kind === 'record' && stored.record.text === '' && start.text === undefined;
    const parsed =
      stored.kind !== 'record' ? undefined : noFileYet ? fileConfig : parseAccepted(stored.record.text, start.file);
    if (stored.kind === 'record' && parsed !== undefined) {
      trust = 'unverified';
      inForce = parsed;
      inForceText = stored.record.text;
      latest = {
        text: inForceText,
        config: parsed,
        meta: { at_ms: stored.record.accepted_at_ms, by: stored.record.accepted_by, how: stored.record.how },
      };
    } else {
      trust = 'untrusted';
      // Neutral on purpose: a copy that does not parse (a rule added since it was accepted, or a forged one: its seal is
      // not checked) says nothing more here; the card shows postern.yaml's own problem, naming the field.
      untrustedReason = stored.kind === 'bad' ? stored.reason : 'the accepted copy does not load as a configuration';
      inForce = emptyConfig(start.file);
      inForceText = '';
      latest = { text: '', config: inForce, meta: null };
      logger?.warn(
        { reason: untrustedReason },
        'the accepted configuration is damaged: every route is refused until a person accepts one',
      );
    }
  }

  const live = createLiveConfig(inForce);

  /**
   * What was just sealed (`latest`) goes into force now. Only a verified configuration with an unlocked vault gets
   * here: the sealed text is what a person decided, and it parsed when sealed.
   */
  const applyLatest = (how: 'accepted' | 'edited', by: string): ConfigApplied => {
    const { restart_needed_for } = live.apply(latest.config);
    inForceText = latest.text;
    const digest = digestOf(latest.text);
    logger?.info({ digest, how, restart_needed_for }, 'configuration applied without a restart');
    return { digest, by: by.slice(0, configAcceptedByCharsMax), how, restart_needed_for };
  };

  const seal = (text: string, by: string, how: AcceptedHow): void => {
    if (vault === undefined) throw new CodedError('VAULT_LOCKED', 'the vault is locked', { field: '' });
    const record = sealRecord(vault, text, options.clock.nowMs(), by, how);
    writeAtomically(acceptedFile, JSON.stringify(record));
    latest = {
      text,
      config: text === '' ? emptyConfig(start.file) : parseConfig(text, start.file),
      meta: { at_ms: record.accepted_at_ms, by, how },
    };
  };

  /**
   * First use is the person's act of creating the vault, nothing else: a file found with no accepted copy next to a
   * vault that exists was never accepted or its copy was deleted (an agent can also delete the journal and anchor and
   * empty the vault's rows, so none of those can vouch for it). Even at a creation, a directory that ran before, or a
   * file that turns on the unattended opt-out (it would let a process decide as a person), waits for a person.
   */
  const refuseFirstUse = (v: CredentialVault): void => {
    if (trust !== 'first_use') return;
    if (history.earlierRun !== null)
      awaitFirstAcceptance(
        `there is no accepted copy of postern.yaml, yet this data directory has run before (${history.earlierRun}): a person accepts the whole file before anything is sent`,
      );
    else if (!creatingVault && v.state() !== 'uninitialized')
      awaitFirstAcceptance(
        'there is no accepted copy of postern.yaml: only the file present when a person creates the vault is trusted on first use, so a person accepts this one before anything is sent',
      );
    // The opt-out lets a process decide as if it were a person: never sealed because a file was merely found.
    else if (fileConfig.operator?.unattended_decisions === true)
      awaitFirstAcceptance(
        'postern.yaml turns on operator.unattended_decisions and no person has accepted a configuration yet: a person accepts the file before anything is sent',
      );
  };

  /** A first-use copy sealed by `postern vault init` is journaled at the first unlock of the directory's first run. */
  let firstUseJournaled = false;
  const journalSealedFirstUse = (record: AcceptedRecord): void => {
    if (record.how !== 'first_use' || history.earlierRun !== null || firstUseJournaled) return;
    firstUseJournaled = true;
    history.recordFirstUse?.({
      digest: digestOf(record.text),
      by: record.accepted_by,
      how: 'first_use',
      restart_needed_for: [],
    });
  };

  const onUnlocked = (): void => {
    if (vault === undefined) return;
    refuseFirstUse(vault);
    if (trust === 'unverified' && stored.kind === 'record') {
      if (macHolds(vault, stored.record)) {
        trust = 'verified';
        journalSealedFirstUse(stored.record);
      } else {
        trust = 'untrusted';
        untrustedReason =
          'the accepted copy failed its MAC check (changed outside Postern, or sealed by another vault)';
        // Whatever was accepted on top of an untrusted copy is not trusted either.
        unsealed = undefined;
        logger?.warn('the accepted configuration failed its MAC: every route is refused until a person accepts one');
        return;
      }
    }
    if (trust === 'first_use') trust = 'verified';
    if (unsealed === undefined || (trust === 'untrusted' && !acceptedThisRun)) return;
    const { text, by, how } = unsealed;
    try {
      seal(text, by, how);
      unsealed = undefined;
      logger?.info({ how }, 'configuration accepted and sealed');
      // The journal says which configuration was trusted on first use, and that no person accepted it.
      if (how === 'first_use') {
        firstUseJournaled = true;
        history.recordFirstUse?.({
          digest: digestOf(text),
          by: by.slice(0, configAcceptedByCharsMax),
          how,
          restart_needed_for: [],
        });
      }
    } catch (error) {
      // A full disk loses only the record: the next start asks again (first use, or a card).
      logger?.error(
        { code: isCodedError(error) ? error.code : (error as NodeJS.ErrnoException).code },
        'the accepted configuration could not be written',
      );
    }
  };

  const changePending = (text: string): boolean =>
    digestOf(text) !== digestOf(latest.text) || (trust === 'untrusted' && !acceptedThisRun);

  return {
    config: live,
    trust: () => trust,
    attach(v, h) {
      vault = v;
      history = h;
      refuseFirstUse(v);
      v.onUnlock(onUnlocked);
      if (v.state() === 'unlocked') onUnlocked();
    },
    async createVault(init) {
      creatingVault = true;
      try {
        await init();
      } finally {
        creatingVault = false;
      }
    },
    pending() {
      const now = readNow(readOptions);
      const text = now.text ?? '';
      const accepted = trust === 'untrusted' && !acceptedThisRun ? null : latest.meta;
      const acceptNow = trust === 'verified' || (awaitingFirstAcceptance && digestOf(text) === digestOf(inForceText));
      const textNotInForce = digestOf(latest.text) !== digestOf(inForceText);
      const base = {
        trust,
        untrusted_reason: trust === 'untrusted' ? untrustedReason : null,
        accepted: accepted === null ? null : { ...accepted, digest: digestOf(latest.text) },
        // An untrusted run refuses everything until it restarts on the copy a person just accepted.
        restart_needed:
          (acceptedThisRun && (trust === 'untrusted' || textNotInForce)) || live.restartNeededFor().length > 0,
        accept_applies: acceptNow ? ('now' as const) : ('next_start' as const),
      };
      if (now.problem === undefined && !changePending(text)) return { ...base, change: null };
      const change = {
        file: start.file,
        digest: digestOf(text),
        routes: [],
        ssh_hosts: [],
        mcp_servers: [],
        settings: [],
        invalid: now.problem ?? null,
      };
      if (now.problem !== undefined) return { ...base, change };
      try {
        const after = now.text === undefined ? emptyConfig() : parseConfig(now.text, start.file);
        // A diff only against what this run knows a person decided: a copy whose seal an unlock verified, or an
        // acceptance or edit made in this run (first use: the file in force). Without the key (the vault locked since
        // start, or no broker) the copy is only what the file claims — an agent can write one whose text is the new
        // file minus one harmless line — so the card shows the whole file as new.
        const baselineKnown = trust === 'verified' || trust === 'first_use' || acceptedThisRun;
        const before = baselineKnown ? latest.config : emptyConfig();
        return { ...base, change: { ...change, ...diffConfigs(before, after) } };
      } catch (error) {
        if (!isCodedError(error)) throw error;
        return {
          ...base,
          change: { ...change, invalid: problemOf(error) },
        };
      }
    },
    accept(digest, actor) {
      if (vault?.state() !== 'unlocked')
        throw new CodedError(
          'VAULT_LOCKED',
          'unlock the vault first: the accepted configuration is sealed with its key',
          { field: '' },
        );
      // An opt-out read from a copy that failed its check is no opt-out a person made.
      if (actor.auth === 'unattended_opt_out' && trust === 'untrusted') {
        throw new CodedError(
          'OPERATOR_PROOF_REQUIRED',
          'the accepted configuration is untrusted: only a person can accept one now',
          { field: 'proof' },
        );
      }
      const text = fileToAccept(readOptions, digest);
      const by = actorLabel(actor);
      seal(text, by, 'accepted');
      acceptedThisRun = true;
      if (awaitingFirstAcceptance && digest === digestOf(inForceText)) {
        // The person accepted exactly the configuration this run loaded: it is in force now, no restart.
        awaitingFirstAcceptance = false;
        trust = 'verified';
        untrustedReason = null;
        logger?.info({ digest }, 'configuration accepted (operator); in force now');
        const applied: ConfigApplied = {
          digest,
          by: by.slice(0, configAcceptedByCharsMax),
          how: 'accepted',
          restart_needed_for: [],
        };
        return { digest, applies: 'now', restart_needed_for: [], applied };
      }
      if (trust === 'verified') {
        // Verified at this unlock, and a person decided on exactly these bytes: nothing is gained by waiting.
        const applied = applyLatest('accepted', by);
        return { digest, applies: 'now', restart_needed_for: applied.restart_needed_for, applied };
      }
      logger?.info({ digest }, 'configuration change accepted (operator); applies at the next start');
      return { digest, applies: 'next_start' };
    },
    assertNothingPending(text) {
      if (changePending(text)) {
        throw new CodedError(
          'CONFIG_PENDING',
          'postern.yaml has a change no person accepted (or the accepted copy is untrusted): review it in Routes & hosts first',
          { field: '' },
        );
      }
    },
    edited(text, actor) {
      acceptedThisRun = true;
      const by = actorLabel(actor);
      // Only reached with nothing pending (assertNothingPending): the edit stands on what a person accepted.
      if (vault?.state() === 'unlocked') {
        seal(text, by, 'edited');
        return trust === 'verified' ? applyLatest('edited', by) : undefined;
      }
      unsealed = { text, by, how: 'edited' };
      latest = {
        text,
        config: parseConfig(text, start.file),
        meta: { at_ms: options.clock.nowMs(), by, how: 'edited' },
      };
      return undefined;
    },
    agentRefusal(tool) {
      if (trust !== 'untrusted' || (tool !== 'http_request' && tool !== 'ssh_exec' && tool !== 'mcp_tool'))
        return undefined;
      return untrustedAnswer(tool === 'http_request' ? 'route' : tool === 'ssh_exec' ? 'host' : 'name');
    },
    guardVault(v) {
      const refused = (): boolean => trust === 'untrusted';
      return {
        state: () => (refused() ? 'locked' : v.state()),
        list: () => v.list(),
        describe: (name) => v.describe(name),
        withSecret: (name, use) =>
          refused()
            ? Promise.reject(new CodedError('VAULT_LOCKED', 'the configuration is untrusted'))
            : v.withSecret(name, use),
        wrap: (purpose, plaintext) => v.wrap(purpose, plaintext),
        unwrap: (purpose, sealed) => v.unwrap(purpose, sealed),
        onLock: (listener) => v.onLock(listener),
        onUnlock: (listener) => v.onUnlock(listener),
      };
    },
  };
}

/**
 * The data directory's history as the files show it with no broker running (`postern config pending|accept`): the
 * journal's events (read-only, no recovery) and the integrity anchor's file, read when first asked (only a
 * configuration still on first use asks: a card over an accepted copy opens no journal). The broker reads the same
 * facts from the journal it opened and the anchor's verdict (broker-runtime.ts).
 */
export function dataDirHistoryFromFiles(dataDir: string, env: NodeJS.ProcessEnv = process.env): DataDirHistory {
  let earlierRun: string | null | undefined;
  return {
    get earlierRun() {
      if (earlierRun === undefined) earlierRun = earlierRunFromFiles(dataDir, env);
      return earlierRun;
    },
  };
}

function earlierRunFromFiles(dataDir: string, env: NodeJS.ProcessEnv): string | null {
  const events = readJournalSnapshot(dataDir).events;
  if (events > 0) return `its journal holds ${events} events`;
  if (readAnchorFile(anchorFileOf(dataDir, env)).kind !== 'absent')
    return 'an integrity anchor was written for its journal';
  return null;
}

/** What `postern vault init` did with the configuration present when it created the vault. */
export type FirstUseAtCreation =
  | { readonly sealed: true; readonly digest: string; readonly file: string; readonly present: boolean }
  | { readonly sealed: false; readonly file: string; readonly reason: string };

/**
 * A person just created the vault at a terminal (`postern vault init`; `vault` is the new vault, unlocked): the one moment
 * a configuration is trusted on first use with no broker running. The file present now is sealed as `first_use` (no
 * file: the empty configuration, so any file written later is a card a person accepts). Nothing is sealed — the file
 * waits for a person — when it does not load, when it turns on the unattended opt-out, when the directory ran before
 * (its journal or anchor says so), or when an accepted copy is already there (it is another vault's, or planted: the
 * next unlock refuses it and the card shows the whole file).
 */
export function sealConfigAtVaultCreation(options: {
  readonly dataDir: string;
  readonly file?: string;
  readonly vault: CredentialVault;
  readonly clock: Clock;
  readonly env?: NodeJS.ProcessEnv;
}): FirstUseAtCreation {
  const readOptions = { dataDir: options.dataDir, ...(options.file === undefined ? {} : { file: options.file }) };
  const fileOf = options.file ?? path.join(options.dataDir, configFileName);
  const refused = (reason: string): FirstUseAtCreation => ({ sealed: false, file: fileOf, reason });
  let now: { text: string | undefined; file: string };
  try {
    now = readConfigText(readOptions);
    if (now.text !== undefined && parseConfig(now.text, now.file).operator?.unattended_decisions === true)
      return refused('it turns on operator.unattended_decisions, which only a person accepting it can turn on');
  } catch (error) {
    if (!isCodedError(error)) throw error;
    return refused(`it does not load (${error.code})`);
  }
  const acceptedFile = path.join(options.dataDir, acceptedConfigDirName, acceptedConfigFileName);
  if (readAcceptedRecord(acceptedFile).kind !== 'none') return refused('an accepted copy is already there');
  const { earlierRun } = dataDirHistoryFromFiles(options.dataDir, options.env);
  if (earlierRun !== null) return refused(`this data directory has run before (${earlierRun})`);
  const text = now.text ?? '';
  const record = sealRecord(options.vault, text, options.clock.nowMs(), 'trust on first use', 'first_use');
  writeAtomically(acceptedFile, JSON.stringify(record));
  return { sealed: true, digest: digestOf(text), file: now.file, present: now.text !== undefined };
}

/**
 * A person accepts postern.yaml with no broker running (`postern config accept` when none runs): the file as it is now,
 * named by the digest they saw, sealed with the vault they unlocked. A running broker must not be bypassed: the CLI
 * goes through it when one runs.
 */
export function acceptConfigFile(options: {
  readonly dataDir: string;
  readonly file?: string;
  readonly vault: CredentialVault;
  readonly clock: Clock;
  readonly actor: OperatorActor;
  readonly digest: string;
}): { digest: string; file: string } {
  if (options.vault.state() !== 'unlocked')
    throw new CodedError('VAULT_LOCKED', 'unlock the vault first: the accepted configuration is sealed with its key', {
      field: '',
    });
  const readOptions = { dataDir: options.dataDir, ...(options.file === undefined ? {} : { file: options.file }) };
  const acceptedFile = path.join(options.dataDir, acceptedConfigDirName, acceptedConfigFileName);
  // The card was computed without the key; the key is here now. A copy that fails its seal may have shaped that card
  // (an agent's copy of the new file minus one line, under a person's name): nothing is sealed over it from here.
  const stored = readAcceptedRecord(acceptedFile);
  if (stored.kind === 'bad' || (stored.kind === 'record' && !macHolds(options.vault, stored.record)))
    throw new CodedError(
      'CONFIG_UNTRUSTED',
      'the last accepted copy of postern.yaml failed its seal check (changed outside Postern): nothing was accepted. ' +
        'Start the broker and unlock the vault, review the whole file with `postern config pending`, then accept it',
      { field: 'digest' },
    );
  const text = fileToAccept(readOptions, options.digest);
  const record = sealRecord(options.vault, text, options.clock.nowMs(), actorLabel(options.actor), 'accepted');
  writeAtomically(acceptedFile, JSON.stringify(record));
  return { digest: options.digest, file: readOptions.file ?? path.join(options.dataDir, configFileName) };
}

/** postern.yaml as it is now, if it is the file whose digest the person saw and it loads; else a coded refusal. */
function fileToAccept(readOptions: { dataDir: string; file?: string }, digest: string): string {
  const now = readConfigText(readOptions);
  const text = now.text ?? '';
  if (digestOf(text) !== digest)
    throw new CodedError(
      'DECISION_CONFLICT',
      'postern.yaml changed since that card was read; nothing was accepted, look again',
      { field: 'digest' },
    );
  if (now.text !== undefined) parseConfig(now.text, now.file);
  return text;
}

/** `sha256:<hex>` of the text (absent file: the empty text, which never loads, so it names "no file"). */
export function digestOf(text: string): string {
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`;
}

function macInput(r: Omit<AcceptedRecord, 'key' | 'mac'>): string {
  return JSON.stringify([macDomain, r.version, r.text, r.accepted_at_ms, r.accepted_by, r.how]);
}

function sealRecord(vault: CredentialVault, text: string, atMs: number, by: string, how: AcceptedHow): AcceptedRecord {
  const key = randomBytes(macKeyBytes);
  try {
    const body = {
      version: 1 as const,
      text,
      accepted_at_ms: atMs,
      accepted_by: by.slice(0, configAcceptedByCharsMax),
      how,
    };
    const wrapped = vault.wrap(macKeyPurpose, key);
    return {
      ...body,
      key: Buffer.from(wrapped).toString('base64'),
      mac: createHmac('sha256', key).update(macInput(body)).digest('hex'),
    };
  } finally {
    key.fill(0);
  }
}

function macHolds(vault: CredentialVault, record: AcceptedRecord): boolean {
  let key: Uint8Array;
  try {
    key = vault.unwrap(macKeyPurpose, Buffer.from(record.key, 'base64'));
  } catch {
    return false;
  }
  try {
    const expected = createHmac('sha256', key).update(macInput(record)).digest();
    const given = Buffer.from(record.mac, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  } finally {
    key.fill(0);
  }
}

type StoredRecord = { kind: 'none' } | { kind: 'record'; record: AcceptedRecord } | { kind: 'bad'; reason: string };

/** The accepted copy, shape-checked (its MAC waits for the vault). Absent is first use; anything else odd is untrusted. */
function readAcceptedRecord(file: string): StoredRecord {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    return {
      kind: 'bad',
      reason: `the accepted copy cannot be read (${String((error as NodeJS.ErrnoException).code ?? 'unreadable').slice(0, 32)})`,
    };
  }
  if (bytes.length > acceptedBytesMax)
    return { kind: 'bad', reason: 'the accepted copy is larger than any configuration' };
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return { kind: 'bad', reason: 'the accepted copy is not JSON' };
  }
  const r = value as Partial<AcceptedRecord> | null;
  const shaped =
    r !== null &&
    typeof r === 'object' &&
    r.version === 1 &&
    typeof r.text === 'string' &&
    Number.isSafeInteger(r.accepted_at_ms) &&
    typeof r.accepted_by === 'string' &&
    // Cut to this when sealed: a longer one was written by something else (and would not fit the card's contract).
    r.accepted_by.length <= configAcceptedByCharsMax &&
    (r.how === 'first_use' || r.how === 'accepted' || r.how === 'edited') &&
    typeof r.key === 'string' &&
    typeof r.mac === 'string' &&
    /^[0-9a-f]{64}$/.test(r.mac);
  return shaped
    ? { kind: 'record', record: r as AcceptedRecord }
    : { kind: 'bad', reason: 'the accepted copy is not in the expected shape' };
}

/** The accepted text as a configuration ('' is "no file"); undefined when it does not load. */
function parseAccepted(text: string, file: string): PosternConfig | undefined {
  if (text === '') return emptyConfig(file);
  try {
    return parseConfig(text, file);
  } catch (error) {
    if (isCodedError(error)) return undefined;
    throw error;
  }
}

/** The file now, for the card: a read or load problem is shown, not thrown. */
function readNow(options: { dataDir: string; file?: string }): {
  text: string | undefined;
  problem?: { code: string; message: string; field: string | null };
} {
  try {
    return readConfigText(options);
  } catch (error) {
    if (!isCodedError(error)) throw error;
    return { text: undefined, problem: problemOf(error) };
  }
}

/**
 * Why the file does not load, as the card shows it: the message cut to the contract's bound with a marker, since the
 * file is anyone's to write (an unknown key of a thousand characters is named in full by the schema's message) and an
 * answer over the bound is not sent at all (config.pending fails closed, and the person would lose the card).
 */
function problemOf(error: CodedError): { code: string; message: string; field: string | null } {
  return {
    code: error.code,
    message: cutToChars(error.message, configInvalidMessageCharsMax),
    field: error.field ?? null,
  };
}

function untrustedAnswer(field: string): ToolAnswer {
  const message =
    'the accepted configuration failed its integrity check; nothing is sent on any route until a person accepts a configuration';
  const structured: AgentRefusal = {
    invocation_id: null,
    error: { code: 'CONFIG_UNTRUSTED', phase: 'validation', outcome: 'not_attempted', retry: 'never', message, field },
  };
  return { isError: true, structured, text: `CONFIG_UNTRUSTED: ${message}` };
}
