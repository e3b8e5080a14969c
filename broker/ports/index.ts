export type { Clock } from './clock.js';
export type { IdSource } from './id-source.js';
export { systemClock } from './system-clock.js';
export { createRandomIdSource } from './random-id-source.js';
export {
  credentialKinds,
  type CredentialInfo,
  type CredentialKind,
  type CredentialVault,
  type SecretMaterial,
  type VaultState,
} from './credential-vault.js';
export type { DispatchGate, HeldObservations } from './dispatch-gate.js';
export { PendingAppends } from './pending-appends.js';
export type {
  AgentBackend,
  CallerStop,
  CallProgress,
  CallStop,
  ResultHandoff,
  TargetNames,
  ToolAnswer,
  UpstreamToolListing,
} from './agent-backend.js';
export { brokerStopping } from './agent-backend.js';
export type {
  DecisionResult,
  OperatorActor,
  OperatorQueue,
  OperatorReconciler,
  ReconcileResult,
} from './operator-queue.js';
export type { VaultKeyProtection, VaultKeyProtector } from './vault-key-protector.js';
