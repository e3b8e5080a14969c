export {
  createAgentBackend,
  sessionIdFor,
  sessionSweepMsDefault,
  type AgentBackendDeps,
  type RunningAgentBackend,
} from './agent-backend.js';
export {
  executeHttpAction,
  type HttpActionDeps,
  type HttpActionOptions,
  type HttpActionResult,
} from './execute-http-action.js';
export { retryKeptRequest } from './retry-http.js';
export { executeSshAction, type SshActionDeps, type SshActionResult } from './execute-ssh-action.js';
export { closeUnsentRecordings, unsentCast } from './unsent-recordings.js';
export { executeMcpAction, type McpActionDeps, type McpActionResult } from './execute-mcp-action.js';
export { mcpSecrets, withServerSecrets } from './mcp-server-secrets.js';
export { stateEnvelope } from './state-envelope.js';
export { openActionsPerSessionMax, runningActionsPerSessionMax } from './open-actions.js';
export {
  createAutomaticReconcile,
  createReconciler,
  planReconcile,
  reconcileAction,
  type ReconcileDeps,
} from './reconcile-action.js';
export {
  CredentialRequests,
  credentialRequestsPendingMax,
  credentialRequestsPendingPerSessionMax,
  type CredentialRequestsOptions,
  type ProvisionedCredential,
} from './credential-requests.js';
export { requireKeptRequest } from './kept-request.js';
