/**
 * The configuration's constants the contract names, with no schema: the configuration's own path (postern.yaml parsed,
 * the pending card, an acceptance with no broker running) imports them from here and so builds none of the API's zod
 * schemas (issue 18's cold start). The contract's index exports them with the rest.
 */

/**
 * Settings read once at start (the vault's idle timer, the result purge, the UI's port): a configuration applied
 * live names the ones it changed, which keep their start values until the next start.
 */
export const startBoundConfigSettings = [
  'agents.credential_request_ttl_s',
  'vault.auto_lock_minutes',
  'results.retention_seconds',
  'operator.port',
] as const;
export type StartBoundConfigSetting = (typeof startBoundConfigSettings)[number];

/**
 * Every ALLOWLIST_* event has this one configuration subject, so the allowlist is one subject's events in append
 * order (read back at start with the journal's per-subject read). A fixed id, not a configuration digest's prefix.
 */
export const allowlistSubjectId = 'cfg_a110e115700000a1';
/** Every INTEGRITY_READOPTED event has this one configuration subject (a fixed id, like allowlistSubjectId). */
export const integritySubjectId = 'cfg_a4c40000000000a4';

/** How long a credential request waits for a person by default (postern.yaml `agents.credential_request_ttl_s`). */
export const credentialRequestTtlSecondsDefault = 15 * 60;

/**
 * A field's value on the pending-change card is whole up to this: room for any SSH command rule, route rule or tool
 * rule whose text needs no JSON escapes. Past it the value ends in a marker that says it is cut and where the whole
 * is (broker/config/config-diff.ts), never in a bare "…".
 */
export const configChangeValueCharsMax = 4096;
/** Who accepted a configuration, as the accepted copy records it (the sealing code cuts to this; a longer one is not ours). */
export const configAcceptedByCharsMax = 300;
/** Why the file as it is now does not load, on the card: a longer message (an agent's long unknown key) is cut to this. */
export const configInvalidMessageCharsMax = 1000;
