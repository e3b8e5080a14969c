import path from 'node:path';
import type { Logger } from 'pino';
import { mcpServerSpec } from '../actions/execute-mcp-action.js';
import {
  createGuardedFetch,
  defaultMcpLimits,
  McpOAuth,
  type McpOAuthLimits,
  type McpUpstreams,
} from '../channels/mcp/index.js';
import type { PosternConfig } from '../config/index.js';
import { CodedError } from '../contract/index.js';
import type { Clock, CredentialVault } from '../ports/index.js';
import { createMcpOAuthStore, mcpOAuthFileName } from './mcp-oauth-store.js';
import type { OperatorBroker } from './operator-broker.js';

/** Bound on an authorization server's replies (metadata, registration, tokens): far above any real one. */
const oauthReplyBytesMax = 1024 * 1024;

/**
 * OAuth for the upstream MCP servers with `oauth:` (docs/upstream-mcp.md): grants sealed under the vault in the
 * data directory, every request to an authorization server through the network guard on a pinned socket.
 */
export function createUpstreamOAuth(o: {
  dataDir: string;
  vault: Pick<CredentialVault, 'wrap' | 'unwrap'>;
  clock: Clock;
  logger: Logger | undefined;
  limits?: Partial<McpOAuthLimits>;
}): McpOAuth {
  return new McpOAuth({
    store: createMcpOAuthStore(path.join(o.dataDir, mcpOAuthFileName), o.vault),
    clock: o.clock,
    fetch: createGuardedFetch({
      connectTimeoutMs: defaultMcpLimits.connectTimeoutMs,
      dnsAddressesMax: defaultMcpLimits.dnsAddressesMax,
      replyBytesMax: oauthReplyBytesMax,
    }),
    ...(o.logger === undefined ? {} : { logger: o.logger }),
    ...(o.limits === undefined ? {} : { limits: o.limits }),
  });
}

/**
 * `mcp_servers.authorize`: a person starts the authorization of one server; the answer is the URL for their
 * browser — the broker's loopback start link, a one-time secret that binds the authorization to the browser that
 * opens it first (oauth-callback.ts) — and when the loopback listener gives up.
 */
export function createMcpOAuthOperator(o: {
  config: PosternConfig;
  oauth: McpOAuth;
  upstreams: McpUpstreams;
  logger: Logger | undefined;
}): Pick<OperatorBroker, 'mcp_servers.authorize'> {
  return {
    'mcp_servers.authorize': async (input) => {
      const server = o.config.mcpServers.get(input.server);
      if (server === undefined)
        throw new CodedError('NOT_FOUND', 'no MCP server by that name in postern.yaml', { field: 'server' });
      if (server.oauth === undefined)
        throw new CodedError('INVALID_ARGUMENT', `the MCP server ${server.name} has no oauth: section`, {
          field: 'server',
        });
      const started = await o.oauth.authorize(mcpServerSpec(server));
      void started.done.then((how) =>
        o.logger?.info({ mcp_server: server.name, how }, 'mcp oauth authorization ended'),
      );
      return {
        server: server.name,
        authorization_url: started.startUrl,
        expires_at_ms: started.expiresAtMs,
      };
    },
  };
}
