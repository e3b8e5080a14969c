/**
 * The typed TypeScript SDK for programmatic agents (`import { connectPostern } from 'postern/sdk'`).
 * It speaks the same MCP as any agent, straight to the broker's socket.
 */
export {
  connectPostern,
  agentSocketRelativePath,
  type ActionReply,
  type CallOptions,
  type ConnectOptions,
  type PosternClient,
} from './postern-client.js';
export { PosternActionError, PosternConnectionError } from './postern-error.js';
export { nextRetry, retryAttemptsCeiling, type RetryOptions, type RetryStep } from './retry-policy.js';
export { SocketClientTransport } from './socket-client-transport.js';
export type { AgentRouteList, AgentToolInput, AgentToolReply, AgentRefusal, Envelope } from '../contract/index.js';
