import type { McpSecrets } from '../channels/mcp/index.js';
import { mcpCredentialRefs, renderMcpEnv, type McpServerSettings } from '../config/index.js';
import { CodedError } from '../contract/index.js';
import type { CredentialInfo, CredentialVault, SecretMaterial } from '../ports/index.js';
import { secretParts } from './secret-scrubber.js';

/** One credential a server uses, opened for one use. */
export interface OpenedCredential {
  readonly name: string;
  readonly info: CredentialInfo;
  readonly secret: SecretMaterial;
}

/**
 * Runs `use` with every credential the server names opened, each checked: the vault holds it, it is bound to the
 * server's name, and its kind can be handed to an MCP server (never an SSH key). The refusals are the vault's codes
 * (VAULT_LOCKED, UNKNOWN_CREDENTIAL, CREDENTIAL_MISSING) with the field to fix; a credential's name is never echoed.
 */
export async function withServerSecrets<T>(
  vault: CredentialVault,
  server: McpServerSettings,
  use: (opened: readonly OpenedCredential[]) => Promise<T> | T,
): Promise<T> {
  const names = mcpCredentialRefs(server);
  const open = async (i: number, opened: OpenedCredential[]): Promise<T> => {
    const name = names[i];
    if (name === undefined) return use(opened);
    return vault.withSecret(name, (secret, info) => {
      if (!boundToServer(info, server.name))
        throw new CodedError('CREDENTIAL_MISSING', `a credential of ${server.name} is not bound to it`, {
          field: 'mcp_servers',
        });
      if (secret.kind === 'ssh_key')
        throw new CodedError('CREDENTIAL_MISSING', `an SSH key cannot be handed to the MCP server ${server.name}`, {
          field: 'mcp_servers',
        });
      return open(i + 1, [...opened, { name, info, secret }]);
    });
  };
  return open(0, []);
}

/** A credential is bound to an MCP server by the server's name (case-insensitive), as routes are by theirs. */
export function boundToServer(info: CredentialInfo, serverName: string): boolean {
  return info.bindings.some((b) => b.toLowerCase() === serverName.toLowerCase());
}

/**
 * What the channel gives a server at (re)start: its environment with every `{credential:NAME}` rendered (the bare
 * secret), the header a streamable_http server's credential becomes, and every form of every secret for scrubbing.
 */
export function mcpSecrets(server: McpServerSettings, opened: readonly OpenedCredential[]): McpSecrets {
  const byName = new Map(opened.map((o) => [o.name, o.secret]));
  const env = renderMcpEnv(server.env ?? {}, (name) => bareSecret(byName.get(name), name));
  const headers: Record<string, string> = {};
  const credential = server.credential === undefined ? undefined : byName.get(server.credential);
  if (credential?.kind === 'bearer') headers['authorization'] = `Bearer ${credential.token}`;
  else if (credential?.kind === 'header') headers[credential.header.toLowerCase()] = credential.value;
  else if (credential !== undefined)
    throw new CodedError('CREDENTIAL_MISSING', `the credential of ${server.name} must be of kind bearer or header`, {
      field: 'mcp_servers',
    });
  const secrets = opened.flatMap((o) => secretParts(o.secret)).map((part) => Buffer.from(part, 'utf8'));
  return { env, headers, secrets };
}

/** The value a `{credential:NAME}` reference renders to: the secret itself, as the server's own docs would ask. */
function bareSecret(secret: SecretMaterial | undefined, name: string): string {
  switch (secret?.kind) {
    case 'bearer':
      return secret.token;
    case 'header':
      return secret.secret;
    case 'basic':
      return secret.password;
    case 'query':
      return secret.value;
    case 'aws_sigv4':
    case 'oauth2_client':
      // A signing key or a client secret is used by the broker to make a request, never handed over as text.
      throw new CodedError('CREDENTIAL_MISSING', `a ${secret.kind} credential cannot be given to an MCP server`, {
        field: 'mcp_servers',
      });
    default:
      // mcpCredentialRefs named it, so withServerSecrets opened it: this is a bug, never user input.
      throw new Error(`credential reference ${name.length} chars long was not opened`);
  }
}
