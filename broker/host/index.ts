/**
 * The broker's public entry: everything a composition root (broker/cli, app/main) needs to run a
 * broker for a data directory and put an operator surface in front of it. app/ may import only
 * this file and broker/contract (eslint.config.js enforces it).
 */
export {
  createBrokerRuntime,
  readDataDirStatus,
  type BrokerRuntime,
  type BrokerRuntimeOptions,
  type DataDirStatus,
} from './broker-runtime.js';
export { describeHardening, hardenProcess, type ProcessHardening } from './harden-process.js';
export {
  actorOf,
  createOperatorHandlers,
  operatorName,
  type OperatorCaller,
  type OperatorHandlers,
} from './operator-handlers.js';
export { acceptConfigFile, loadConfigIntegrity, sealConfigAtVaultCreation } from './config-integrity.js';
// The desktop app's safeStorage policy (app/ may import only this entry).
export { chooseKeyProtector, keyProtectorBackend, type KeyProtectorDecision } from '../vault/index.js';
export type { VaultKeyProtection, VaultKeyProtector } from '../ports/index.js';
export type { OperatorBroker } from './operator-broker.js';
export { resolveDataDir, ensureDataDir, type DataDirInputs } from './data-dir.js';
export {
  signInCodeLabel,
  startOperatorHttpHost,
  type OperatorHttpHost,
  type OperatorHttpHostOptions,
  type SignInLink,
} from './http-host.js';
export { contentSecurityPolicy, securityHeaders } from './http-host.js';
export { createWebProof, webProofFor, type WebProof } from './web-proof.js';
export {
  controlSocketFileName,
  controlSocketPath,
  sendControlRequest,
  startControlSocket,
  type ControlReply,
  type ControlRequest,
  type ControlSocket,
} from './control-socket.js';
export {
  describeCutShutdown,
  drainBoundMs,
  drainPollMs,
  runShutdown,
  shutDownRuntime,
  type ShutdownBounds,
  type ShutdownReport,
  type ShutdownSteps,
} from './shutdown-sequence.js';
// The desktop's start-failure box words a refusal with the console's times (app/main/start-failure.ts).
export { BrokerAlreadyRunning, lockDataDir, type DataDirLock } from './data-dir-lock.js';
