export { McpUpstreams, type McpUpstreamsOptions } from './mcp-upstreams.js';
export { defaultMcpLimits, type McpLimits } from './mcp-limits.js';
export {
  mcpUpstreamErrorCodes,
  type McpCallRequest,
  type McpCallResult,
  type McpOAuthSettings,
  type McpChannelReport,
  type McpSecrets,
  type McpServerSpec,
  type McpSetupStage,
  type McpStopReason,
  type McpUpstreamErrorCode,
  type McpUpstreamState,
  type McpUpstreamStatus,
  type McpUpstreamTool,
} from './mcp-types.js';
export { childPath } from './child-transport.js';
export {
  McpOAuth,
  defaultMcpOAuthLimits,
  type McpAuthorization,
  type McpOAuthGrant,
  type McpOAuthLimits,
  type McpOAuthOptions,
  type McpOAuthStore,
} from './oauth-grants.js';
export { createGuardedFetch } from './pinned-fetch.js';
export type { StderrScrubber } from './stderr-log.js';
