export { ApprovalQueue, type ApprovalQueueOptions, type DispatchQueue, type Turn } from './approval-queue.js';
export { createAgentBackend, sessionIdFor, sessionSweepMsDefault, type AgentBackendDeps, type RunningAgentBackend } from './agent-backend.js';
export { executeHttpAction, retryKeptRequest, type HttpActionDeps, type HttpActionOptions, type HttpActionResult } from './execute-http-action.js';
export { executeSshAction, type SshActionDeps, type SshActionResult } from './execute-ssh-action.js';
export { stateEnvelope } from './state-envelope.js';
export { systemQueueTimers, type QueueTimer, type QueueTimers } from './queue-timers.js';
export { bodyPreviewBytesMax, type CardPreview } from './card-preview.js';
export { openActionsPerSessionMax } from './open-actions.js';
export { createAutomaticReconcile, createReconciler, reconcileAction, type ReconcileDeps } from './reconcile-action.js';
