import type { Logger } from 'pino';
import type { HttpChannel } from '../channels/http/index.js';
import type { McpUpstreams } from '../channels/mcp/index.js';
import type { SshChannel } from '../channels/ssh/index.js';
import type { PosternConfig } from '../config/index.js';
import type { Journal, RequestStore, ResultStore } from '../journal/index.js';
import type { Clock, CredentialVault, IdSource } from '../ports/index.js';
import type { ApprovalQueue } from '../queue/approval-queue.js';
import type { CredentialRequests } from './credential-requests.js';
import type { ProcessAllowlist } from './process-allowlist.js';

/** What the agent backend runs on; its own file so the backend and the action call share it without a cycle. */
export interface AgentBackendDeps {
  readonly journal: Journal;
  readonly results: ResultStore;
  readonly queue: ApprovalQueue;
  readonly config: PosternConfig;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly vault: CredentialVault;
  readonly httpChannel: HttpChannel;
  /** Absent: ssh_exec is refused (UNSUPPORTED_ACTION). */
  readonly sshChannel?: SshChannel;
  /** The upstream MCP servers' channel; absent: no upstream tools are listed and a call to one is refused. */
  readonly upstreams?: McpUpstreams;
  /** Agents' credential requests (request_credential); absent: the tool is refused (UNSUPPORTED_ACTION). */
  readonly credentialRequests?: CredentialRequests;
  /** The process allowlist (docs/queue.md): an unscoped entry matching the session's executable approves it at open. */
  readonly allowlist?: ProcessAllowlist;
  readonly logger?: Logger;
  /** Whether the process (pid + kernel start time) still lives; the runtime passes broker/agent's processAlive. */
  readonly processAlive: (pid: number, startTime: string) => boolean;
  readonly sweepMs?: number;
  /** This boot's id (Linux /proc/sys/kernel/random/boot_id); tests pass one. */
  readonly bootId?: string;
  /** Open (undispatched, unclosed) actions per session; default openActionsPerSessionMax. */
  readonly openActionsPerSessionMax?: number;
  /** Running actions (open or dispatched, until their executor returns) per session; default runningActionsPerSessionMax. */
  readonly runningActionsPerSessionMax?: number;
  /** The route's lookup, asked by the retry engine once an idempotency key's window passed. */
  readonly reconcile?: (actionId: string) => Promise<void>;
  /** Sealed copies of requests a person may retry with the same key (execute-http-action.ts). */
  readonly requests?: RequestStore;
}
