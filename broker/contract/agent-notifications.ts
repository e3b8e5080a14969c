// Constants only, no schema: `postern mcp` (broker/cli/mcp-relay.ts) loads this without the contract's schemas.

/**
 * A client that declares `capabilities.experimental["postern.action_recorded"]` in its initialize (`postern mcp`
 * does, for the agent behind it) is sent `notifications/postern/action_recorded` with `{request_id, action_id}` for
 * each of its calls that admitted an action, once that admission is durable and before the call's answer: a shim
 * that loses the answer to a broker restart names the action in the error it answers with, so the agent can ask
 * action_status instead of resending. Other clients are sent nothing new.
 */
export const actionRecordedCapability = 'postern.action_recorded';
export const actionRecordedNotification = 'notifications/postern/action_recorded';
