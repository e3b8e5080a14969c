import { z } from 'zod';
import {
  configAcceptedByCharsMax,
  configChangeValueCharsMax,
  configInvalidMessageCharsMax,
  startBoundConfigSettings,
} from './config-constants.js';
import { ApprovalMode, InjectionKind } from './route-modes.js';

/**
 * The operator API's vault, credential, integrity and configuration methods (issue #8). Merged
 * into `brokerApiSchemas` (operator-api.ts). Three fields carry secrets: `vault.unlock.passphrase`,
 * `vault.init.passphrase` and `credentials.add.secret`. They are bounded here, go only into the vault (never returned,
 * logged or journaled: `secretInputFields` names them for log redaction), and zod's messages for
 * them never quote the value. Why they may travel over the loopback HTTP host: docs/operator.md.
 */

/** Mirrors broker/ports' credentialKinds (the contract imports nothing of ours; a test keeps them equal). */
export const operatorCredentialKinds = [
  'bearer',
  'header',
  'basic',
  'query',
  'ssh_key',
  'aws_sigv4',
  'oauth2_client',
] as const;

/** The vault's own bounds (broker/vault): a passphrase is at most 1 KiB. */
export const passphraseCharsMax = 1_024;
/**
 * A secret through the operator API is at most 16 Ki characters (an SSH private key fits): the
 * HTTP host reads at most 64 KiB of JSON, and a UTF-8, JSON-escaped secret must fit in it. Larger
 * secrets (up to the vault's 64 KiB) go through `postern vault add --from-stdin`.
 */
export const operatorSecretCharsMax = 16 * 1_024;

const vaultStateSchema = z.enum(['uninitialized', 'locked', 'unlocked']);
const credentialName = z.string().min(1).max(64);

/** What anyone may know about a credential: never its secret. */
export const credentialSummarySchema = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.enum(operatorCredentialKinds),
  version_tag: z.string(),
  bindings: z.array(z.string()),
  header: z.string().optional(),
  param: z.string().optional(),
  /** kind header: the value template around `{secret}` (the placeholder, never the value). */
  template: z.string().optional(),
});
export type CredentialSummary = z.infer<typeof credentialSummarySchema>;

/**
 * One run of the offline verifier (`postern audit verify`, broker/audit/verify-journal.ts) over the
 * live journal file, and when it ran. `ok: false` names the first bad append position (`seq`, null
 * when the damage is not a row: a missing table, a bad key) and the verifier's code.
 *
 * `key_source` says what the checkpoint signatures were checked under. `vault`: the vault was unlocked and the
 * journal's key had to be the public half of the vault's audit signing key (as `audit verify --check-key`).
 * `journal`: the vault was locked (or not created), so they were checked only under the key the journal itself
 * names, which whoever can write the file can replace along with every checkpoint: the chain is intact, the signing
 * key was not checked.
 */
export const auditVerifyResultSchema = z.discriminatedUnion('ok', [
  z.object({
    ok: z.literal(true),
    checked_at_ms: z.number().int(),
    events: z.number().int().nonnegative(),
    root: z.string(),
    checkpoints: z.number().int().nonnegative(),
    last_checkpoint_size: z.number().int().nonnegative(),
    unsigned_tail: z.number().int().nonnegative(),
    key_source: z.enum(['vault', 'journal']),
  }),
  z.object({
    ok: z.literal(false),
    checked_at_ms: z.number().int(),
    code: z.string(),
    seq: z.number().int().nullable(),
    message: z.string(),
  }),
]);
export type AuditVerifyResult = z.infer<typeof auditVerifyResultSchema>;

/** A route as loaded at start, for reading: its credential by name only. */
export const routeSummarySchema = z.object({
  name: z.string(),
  base_url: z.string(),
  credential: z.string(),
  injection: z.string(),
  approval: z.string(),
  methods: z.array(z.string()),
  lanes: z.array(z.object({ methods: z.array(z.string()), path: z.string(), lane: z.string() })),
  idempotency_header: z.string().nullable(),
  lookup: z.string().nullable(),
  retry_automatic: z.boolean(),
  tls_pinned: z.boolean(),
  /** The vault holds no credential of that name (names are readable while locked): every call on the route will fail. */
  credential_missing: z.boolean(),
});
export type RouteSummary = z.infer<typeof routeSummarySchema>;

export const sshHostSummarySchema = z.object({
  name: z.string(),
  host: z.string(),
  port: z.number().int(),
  user: z.string(),
  credential: z.string(),
  /** `accept_new`, or how many fingerprints are pinned. */
  host_key: z.string(),
  approval: z.string(),
  lane: z.string().nullable(),
  commands: z.number().int().nonnegative(),
  /** The vault holds no credential of that name: every command on the host will fail. */
  credential_missing: z.boolean(),
});
export type SshHostSummary = z.infer<typeof sshHostSummarySchema>;

const configName = z.string().min(1).max(64);
const approvalMode = z.enum(ApprovalMode);

/**
 * One edit of postern.yaml: add or remove a route or an SSH host entry. The host applies it to the
 * file through the `yaml` library (comments kept), checks the whole result with the configuration
 * schema, and writes it atomically; a trusted broker with its vault unlocked applies it at once (else at
 * the next start). Only the basic fields are offered, with what each injection needs (an aws_sigv4 route's scope, an
 * oauth2_client_credentials route's token endpoint); lanes, idempotency, lookups and TLS stay in the file.
 */
export const configEditSchema = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('add_route'),
    route: z.strictObject({
      name: configName,
      base_url: z.string().min(1).max(2048),
      credential: z.string().min(1).max(200),
      injection: z.enum(InjectionKind),
      approval: approvalMode,
      methods: z
        .array(z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']))
        .min(1)
        .max(7)
        .optional(),
      /** injection aws_sigv4: the scope each request is signed for (the configuration schema checks the names). */
      aws: z.strictObject({ region: z.string().min(1).max(64), service: z.string().min(1).max(64) }).optional(),
      /** injection oauth2_client_credentials: where the token is asked, and for what. */
      oauth2: z
        .strictObject({
          token_url: z.string().min(1).max(2048),
          scopes: z.array(z.string().min(1).max(200)).min(1).max(32).optional(),
          audience: z.string().min(1).max(2048).optional(),
        })
        .optional(),
    }),
  }),
  z.strictObject({ op: z.literal('remove_route'), name: configName }),
  z.strictObject({
    op: z.literal('add_ssh_host'),
    host: z.strictObject({
      name: configName,
      host: z.string().min(1).max(253),
      port: z.number().int().min(1).max(65_535).optional(),
      user: z.string().min(1).max(64),
      credential: z.string().min(1).max(200),
      /** accept_new, or pinned fingerprints (SHA256:…). */
      host_key: z.union([
        z.literal('accept_new'),
        z.strictObject({ pinned: z.array(z.string().min(1).max(100)).min(1).max(8) }),
      ]),
      approval: approvalMode,
    }),
  }),
  z.strictObject({ op: z.literal('remove_ssh_host'), name: configName }),
]);
export type ConfigEdit = z.infer<typeof configEditSchema>;

/** Fields of one entry on the card: a list field is one field per element (256 command rules, tools) plus the rest. */
export const configChangeFieldsMax = 1024;

/** One field of a route, SSH host or settings section that differs, as text (bounded; never a secret: config holds none). */
export const configFieldChangeSchema = z.object({
  field: z.string().max(64),
  before: z.string().max(configChangeValueCharsMax).nullable(),
  after: z.string().max(configChangeValueCharsMax).nullable(),
  /** What the value as it will be matches when that is wider than it reads (an SSH command rule with a `*`). */
  note: z.string().max(1000).optional(),
});
/** A route, an SSH host entry or a settings section (`agents`, `results`, `operator`) that differs. */
export const configEntryChangeSchema = z.object({
  name: z.string().max(64),
  change: z.enum(['added', 'removed', 'changed']),
  fields: z.array(configFieldChangeSchema).max(configChangeFieldsMax),
});
export type ConfigEntryChange = z.infer<typeof configEntryChangeSchema>;

/**
 * Whether the configuration in force can be trusted (docs/config.md): `first_use` until the first
 * unlock accepts it (only while the vault holds no credentials), `unverified` while the vault is
 * locked (its MAC needs the vault's key), `verified`, or `untrusted` (the accepted copy failed its
 * check, or there is none while the vault holds credentials: every route refused).
 */
export const configTrustSchema = z.enum(['first_use', 'unverified', 'verified', 'untrusted']);

export const configPendingSchema = z.object({
  trust: configTrustSchema,
  /** Why the configuration is untrusted, when it is. */
  untrusted_reason: z.string().max(400).nullable(),
  /** The last acceptance: when, by whom, how (`first_use`, `accepted` on a card, `edited` through config.edit). */
  accepted: z
    .object({
      at_ms: z.number().int(),
      by: z.string().max(configAcceptedByCharsMax),
      how: z.enum(['first_use', 'accepted', 'edited']),
      digest: z.string(),
    })
    .nullable(),
  /** True when an acceptance made during this run (or a start-bound setting it changed) takes effect only at the next start. */
  restart_needed: z.boolean(),
  /**
   * What accepting the change shown would do: `now` when the configuration in force is verified (the vault unlocked) and
   * the file loads, or when no configuration was ever accepted with credentials in the vault and the file is exactly the
   * one this run loaded (it is already in force, only refused); else `next_start`.
   */
  accept_applies: z.enum(['now', 'next_start']),
  /** postern.yaml as it is now, against the last accepted configuration; null when they are the same (and trusted). */
  change: z
    .object({
      file: z.string(),
      /** sha256 of the file's bytes: `config.accept` names it, so a person accepts exactly what they saw. */
      digest: z.string(),
      routes: z.array(configEntryChangeSchema),
      ssh_hosts: z.array(configEntryChangeSchema),
      mcp_servers: z.array(configEntryChangeSchema),
      settings: z.array(configEntryChangeSchema),
      /** The file as it is now does not load (it cannot be accepted until fixed). */
      invalid: z
        .object({
          code: z.string(),
          message: z.string().max(configInvalidMessageCharsMax),
          field: z.string().nullable(),
        })
        .nullable(),
    })
    .nullable(),
});
export type ConfigPending = z.infer<typeof configPendingSchema>;

/**
 * With `applies: now`: the changed settings that are read only at start (they keep their old value until the next
 * start); absent with `next_start`, where the whole change waits for it.
 */
/** The MCP clients `postern agent-config` knows (broker/core/agent-hookup.ts agentClients; a test keeps them equal). */
export const operatorAgentClients = ['claude-code', 'claude-desktop', 'cursor', 'vscode'] as const;

/**
 * How to hook each known MCP client up to this broker, as `postern agent-config <client>` prints it: absolute
 * paths to a node, this installation's bin and this broker's data directory. Paths only, never a secret.
 */
export const agentHookupSchema = z.object({
  data_dir: z.string(),
  clients: z.array(
    z.object({ client: z.enum(operatorAgentClients), text: z.string().max(4_096), where: z.string().max(400) }),
  ),
  /** Why the lines may need a change before use (the desktop app runs no `node` of its own), else null. */
  note: z.string().max(400).nullable(),
});
export type AgentHookup = z.infer<typeof agentHookupSchema>;

const restartNeededFor = z.array(z.enum(startBoundConfigSettings)).optional();

export const vaultApiSchemas = {
  'vault.status': {
    input: z.strictObject({}),
    output: z.object({ state: vaultStateSchema, credentials: z.number().int().nonnegative() }),
  },
  'vault.unlock': {
    input: z.strictObject({ passphrase: z.string().min(1).max(passphraseCharsMax) }),
    output: z.object({ state: vaultStateSchema }),
  },
  'vault.lock': { input: z.strictObject({}), output: z.object({ state: vaultStateSchema }) },
  /** Creates the vault (unlocked after); the vault checks the passphrase's length and encoding as `postern vault init` does. */
  'vault.init': {
    input: z.strictObject({ passphrase: z.string().min(1).max(passphraseCharsMax) }),
    output: z.object({ state: vaultStateSchema }),
  },
  'agent.hookup': { input: z.strictObject({}), output: agentHookupSchema },
  'credentials.list': {
    input: z.strictObject({}),
    output: z.object({ state: vaultStateSchema, credentials: z.array(credentialSummarySchema) }),
  },
  'credentials.add': {
    input: z.strictObject({
      name: credentialName,
      kind: z.enum(operatorCredentialKinds),
      secret: z.string().min(1).max(operatorSecretCharsMax),
      bindings: z.array(z.string().min(1).max(255)).max(32),
      header: z.string().min(1).max(128).optional(),
      template: z.string().min(1).max(1_024).optional(),
      param: z.string().min(1).max(128).optional(),
    }),
    output: credentialSummarySchema,
  },
  'credentials.remove': {
    input: z.strictObject({ name: credentialName }),
    output: z.object({ name: z.string(), removed: z.literal(true) }),
  },
  'audit.verify': { input: z.strictObject({}), output: auditVerifyResultSchema },
  'audit.last': {
    input: z.strictObject({}),
    output: z.object({
      last: auditVerifyResultSchema.nullable(),
      // Present while a verify runs: rows checked so far of the log's length (a long verify shows its progress).
      progress: z.object({ checked: z.number().int().nonnegative(), total: z.number().int().nonnegative() }).optional(),
    }),
  },
  'config.show': {
    input: z.strictObject({}),
    output: z.object({
      /** The file the configuration in force came from (null: none existed, so no routes). */
      file: z.string().nullable(),
      routes: z.array(routeSummarySchema),
      ssh_hosts: z.array(sshHostSummarySchema),
      /** True once `config.edit` wrote the file without applying it (the vault was locked): it applies at the next start. */
      edited_since_start: z.boolean(),
    }),
  },
  'config.edit': {
    input: configEditSchema,
    output: z.object({
      file: z.string(),
      routes: z.array(z.string()),
      ssh_hosts: z.array(z.string()),
      /** `now` when the broker is trusted and the vault unlocked (the edit is in force at once), else `next_start`. */
      applies: z.enum(['now', 'next_start']),
      restart_needed_for: restartNeededFor,
    }),
  },
  'config.pending': { input: z.strictObject({}), output: configPendingSchema },
  'config.accept': {
    input: z.strictObject({
      digest: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'the digest config.pending showed: sha256: and 64 hex digits'),
    }),
    output: z.object({
      digest: z.string(),
      applies: z.enum(['now', 'next_start']),
      restart_needed_for: restartNeededFor,
    }),
  },
} as const;
