export {
  configSchema,
  routeSchema,
  sshHostSchema,
  agentsSchema,
  approvalTtlSecondsDefault,
  resultsSchema,
  resultRetentionSecondsDefault,
  type ResultSettings,
  type AgentSettings,
  configJsonSchema,
  httpMethods,
  defaultIdempotentMethods,
  requestParts,
  type PosternConfigInput,
  type RouteSettings,
  type SshHostSettings,
  type VaultSettings,
  vaultAutoLockMinutesDefault,
} from './config-schema.js';
export { loadConfig, readConfigText, emptyConfig, parseConfig, fieldPath, agentSettingsDefault, resultSettingsDefault, configFileName, configBytesMax, type PosternConfig, type Route, type LoadConfigOptions } from './load-config.js';
export { diffConfigs, type ConfigChanges, type EntryChange, type FieldChange } from './config-diff.js';
