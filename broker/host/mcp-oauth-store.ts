import { readFileSync } from 'node:fs';
import type { McpOAuthGrant, McpOAuthStore } from '../channels/mcp/index.js';
import type { CredentialVault } from '../ports/index.js';
import { writeAtomically } from './write-atomically.js';

/** The file in the data directory that holds every upstream server's sealed OAuth grant. */
export const mcpOAuthFileName = 'mcp-oauth.json';

/** A grant file larger than this is not one the broker wrote; it is read as empty rather than parsed. */
const fileBytesMax = 4 * 1024 * 1024;

interface GrantFile {
  readonly version: 1;
  /** Per server: the grant sealed under the vault's key, and whether it holds tokens (not secret: for Status). */
  readonly servers: Record<string, { readonly sealed: string; readonly authorized: boolean }>;
}

/**
 * OAuth grants of upstream MCP servers at rest: each sealed with `vault.wrap('postern.mcp.oauth.v1:<server>', …)`
 * (the server's name is the associated data, so a grant moved to another server's slot fails to open), in one 0600
 * file written atomically. Reading or writing a grant needs the unlocked vault; whether one is held does not.
 */
export function createMcpOAuthStore(file: string, vault: Pick<CredentialVault, 'wrap' | 'unwrap'>): McpOAuthStore {
  const read = (): GrantFile => {
    try {
      const text = readFileSync(file, 'utf8');
      if (text.length > fileBytesMax) return emptyFile();
      const parsed = JSON.parse(text) as Partial<GrantFile>;
      return parsed.version === 1 && typeof parsed.servers === 'object' && parsed.servers !== null
        ? { version: 1, servers: { ...parsed.servers } }
        : emptyFile();
    } catch {
      return emptyFile();
    }
  };
  return {
    held: (server) => read().servers[server]?.authorized === true,
    load: (server) => {
      const entry = read().servers[server];
      if (entry === undefined) return undefined;
      const plain = vault.unwrap(purpose(server), Buffer.from(entry.sealed, 'base64'));
      try {
        return JSON.parse(Buffer.from(plain).toString('utf8')) as McpOAuthGrant;
      } finally {
        plain.fill(0);
      }
    },
    save: (server, grant) => {
      const current = read();
      const servers = { ...current.servers };
      if (grant === undefined) delete servers[server];
      else {
        const plain = Buffer.from(JSON.stringify(grant), 'utf8');
        const sealed = vault.wrap(purpose(server), plain);
        plain.fill(0);
        servers[server] = { sealed: Buffer.from(sealed).toString('base64'), authorized: grant.tokens !== undefined };
      }
      writeAtomically(file, `${JSON.stringify({ version: 1, servers } satisfies GrantFile)}\n`);
    },
  };
}

function purpose(server: string): string {
  return `postern.mcp.oauth.v1:${server}`;
}

function emptyFile(): GrantFile {
  return { version: 1, servers: {} };
}
