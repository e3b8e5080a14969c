import { CodedError } from '../contract/coded-error.js';
import type { ApprovalMode } from '../contract/route-modes.js';
import type { McpServerSettings } from './config-schema.js';

/**
 * Pure helpers over one `mcp_servers[]` entry (docs/config.md, Upstream MCP servers): which approval and lane a
 * tool call gets, which vault credentials the server uses, the child's environment with its references filled in,
 * and the name an agent sees for an upstream tool. The load-time checks that make these safe to call live in
 * config-schema.ts; this file only reads entries that passed them.
 */

/**
 * The vault's credential name rule (broker/vault/credential-input.ts credentialNamePattern), repeated because
 * config may not import the vault; mcp-servers.test.ts keeps the two equal.
 */
export const mcpCredentialNamePattern = /^[a-z0-9][a-z0-9_.-]{0,63}$/i;
/** An upstream tool name an agent may see: MCP's tool name charset, bounded (longer or stranger ones are skipped). */
export const mcpToolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;
/** The server name rule (config-schema.ts): short, so `<server>.<tool>` stays readable and bounded. */
export const mcpServerNamePattern = /^[a-z][a-z0-9_-]{0,31}$/;
/** What a tools[].match glob may hold: the tool name charset plus * (any run, even none) and ? (one character). */
export const mcpToolGlobPattern = /^[A-Za-z0-9_*?-]{1,128}$/;
/** Env var names a server may set: the portable POSIX shape. */
export const mcpEnvKeyPattern = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** The words of the rule that decided, as journaled (events.ts approval_rule is at most 300 characters). */
const ruleTextCharsMax = 300;

const referenceOpen = '{credential:';
const reference = /\{credential:([^{}]*)\}/g;

/**
 * Env keys a server may not set: each decides what runs or what gets loaded into it (the binary search path, the
 * dynamic loader, node's preload flags). A credential placed there could steer the child instead of being data;
 * compared without case because Windows treats `Path` as `PATH`.
 */
export function mcpEnvKeyProblem(key: string): string | undefined {
  if (!mcpEnvKeyPattern.test(key)) return 'an environment variable name: a letter or _, then letters, digits, _';
  const upper = key.toUpperCase();
  if (upper === 'PATH' || upper === 'NODE_OPTIONS' || upper.startsWith('LD_') || upper.startsWith('DYLD_'))
    return `${key} may not be set: it decides what the child runs or loads (PATH, LD_*, DYLD_*, NODE_OPTIONS)`;
  return undefined;
}

/**
 * The credential names a value refers to with `{credential:NAME}`, in order, or a problem when a reference is not
 * well formed (an unclosed or empty one, a name the vault could never hold): such text must fail to load rather
 * than reach a child verbatim.
 */
export function parseCredentialRefs(value: string): { names: string[] } | { problem: string } {
  const names: string[] = [];
  for (const found of value.matchAll(reference)) {
    const name = found[1] ?? '';
    if (!mcpCredentialNamePattern.test(name))
      return { problem: `{credential:${name.slice(0, 64)}} does not name a credential (letters, digits, _ . -)` };
    names.push(name);
  }
  // Every opening must have begun a well-formed reference; one left over is unclosed or nested.
  if (value.split(referenceOpen).length - 1 !== names.length)
    return { problem: 'a {credential: reference is not closed with } (write {credential:NAME})' };
  return { names };
}

/** Every vault credential the server uses (its env references and its `credential`), each once, in file order. */
export function mcpCredentialRefs(server: McpServerSettings): string[] {
  const names = new Set<string>();
  for (const value of Object.values(server.env ?? {})) {
    const refs = parseCredentialRefs(value);
    if ('names' in refs) for (const n of refs.names) names.add(n);
  }
  if (server.credential !== undefined) names.add(server.credential);
  return [...names];
}

/**
 * The child's configured environment with each `{credential:NAME}` replaced by `secretOf(NAME)` in one pass: a
 * secret that itself contains `{credential:…}` stays text, never a second lookup. A malformed reference is a bug
 * here (loading refuses it) and throws rather than handing a child the raw reference; a secret holding a NUL byte
 * cannot be an environment value and is refused without naming the credential.
 */
export function renderMcpEnv(
  env: Readonly<Record<string, string>>,
  secretOf: (name: string) => string,
): Record<string, string> {
  const rendered: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const refs = parseCredentialRefs(value);
    if ('problem' in refs) throw new Error(`env.${key}: ${refs.problem}`);
    rendered[key] = value.replace(reference, (_whole, name: string) => {
      const secret = secretOf(name);
      if (secret.includes('\0'))
        throw new CodedError('CREDENTIAL_MISSING', `env.${key}: the credential's secret holds a NUL byte`, {
          field: `env.${key}`,
        });
      return secret;
    });
  }
  return rendered;
}

/**
 * Approval and lane of one call to `tool` on `server`: the first `tools[]` rule whose glob matches the upstream
 * tool name, else the server's own. `rule` names the deciding rule in words (absent: the server's own applied).
 * Whether a rule may be looser than its server is a load-time check (config-schema.ts), not decided here.
 */
export function mcpToolPolicy(
  server: McpServerSettings,
  tool: string,
): { approval: ApprovalMode; lane: string | null; rule?: string } {
  for (const [index, rule] of server.tools.entries()) {
    if (!mcpGlobMatches(rule.match, tool)) continue;
    const approval = rule.approval ?? server.approval;
    const text = `tools[${index}]: ${rule.match} → ${approval}`;
    return {
      approval,
      lane: rule.lane === undefined ? serverLane(server) : rule.lane,
      rule: text.length > ruleTextCharsMax ? `${text.slice(0, ruleTextCharsMax - 1)}…` : text,
    };
  }
  return { approval: server.approval, lane: serverLane(server) };
}

/**
 * The lane of a server's tools no rule places: the configured one, or `mcp:<name>` — an upstream tool says nothing
 * about what it changes, so an unknown tool is a write and shares its server's lane (DESIGN §4), as an HTTP route's
 * unmatched requests share `route:<name>`. `lane: null` says the tools only read: no lane.
 */
export function serverLane(server: Pick<McpServerSettings, 'name' | 'lane'>): string | null {
  return server.lane === undefined ? `mcp:${server.name}` : server.lane;
}

/** `*` matches any run of characters (including none), `?` exactly one; everything else is literal. Whole name. */
export function mcpGlobMatches(pattern: string, text: string): boolean {
  const source = [...pattern]
    .map((c) => (c === '*' ? '[\\s\\S]*' : c === '?' ? '[\\s\\S]' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`, 'u').test(text);
}

/**
 * The name an agent sees for an upstream tool, `<server>.<tool>`, or undefined when the upstream name is outside
 * MCP's charset or too long (the tool is then skipped and listed as such, never renamed: a rename could make two
 * tools one). Postern's own tool names hold no dot, so these can never shadow them.
 */
export function sanitizeMcpToolName(server: string, tool: string): string | undefined {
  if (!mcpServerNamePattern.test(server) || !mcpToolNamePattern.test(tool)) return undefined;
  return `${server}.${tool}`;
}

/** The inverse of sanitizeMcpToolName: which server and upstream tool an agent-visible name means, if any. */
export function parseMcpToolName(name: string): { server: string; tool: string } | undefined {
  const dot = name.indexOf('.');
  if (dot < 0) return undefined;
  const server = name.slice(0, dot);
  const tool = name.slice(dot + 1);
  return sanitizeMcpToolName(server, tool) === undefined ? undefined : { server, tool };
}
