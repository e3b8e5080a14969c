import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { CodedError } from '../contract/coded-error.js';
import {
  approvalTtlSecondsDefault,
  configSchema,
  resultRetentionSecondsDefault,
  type AgentSettings,
  type OperatorSettings,
  type ResultSettings,
  type RouteSettings,
  type SshHostSettings,
  type McpServerSettings,
  type VaultSettings,
  vaultAutoLockMinutesDefault,
} from './config-schema.js';

export const configFileName = 'postern.yaml';
/** The config file is small by nature; a huge one is a mistake or an attack on the parser. */
export const configBytesMax = 1024 * 1024;
export const caFileBytesMax = 1024 * 1024;

/** One route as the broker uses it: the settings plus what loading derived (origin, base path, CA). */
export interface Route extends RouteSettings {
  readonly origin: string;
  readonly protocol: 'http:' | 'https:';
  readonly hostname: string;
  readonly port: number;
  readonly base_path: string;
  /** PEM text of tls.ca_file, read once at load (a config snapshot, not re-read per request). */
  readonly ca_pem: string | undefined;
}

export interface PosternConfig {
  readonly version: 1;
  readonly routes: ReadonlyMap<string, Route>;
  /** SSH host entries by name: what an agent names instead of an address or a key. */
  readonly sshHosts: ReadonlyMap<string, SshHostSettings>;
  /** Upstream MCP servers by name: their tools are offered to agents as `<name>.<tool>` (docs/upstream-mcp.md). */
  readonly mcpServers: ReadonlyMap<string, McpServerSettings>;
  /** Session approval mode and approval clocks (the `agents` section, defaults filled in). */
  readonly agents: AgentSettings;
  /** How long stored results stay fetchable (the `results` section, defaults filled in). */
  readonly results: ResultSettings;
  /** The `operator` section (absent: no file, or built by hand): unattended decisions off. */
  readonly operator?: OperatorSettings;
  /** The `vault` section (absent: no file, or built by hand): auto-lock after the default idle time. */
  readonly vault?: VaultSettings;
  /** Where it came from; undefined when no file existed (no routes). */
  readonly file: string | undefined;
}

/** The `agents` section when the file omits it (or there is no file). */
export const agentSettingsDefault: AgentSettings = {
  session_approval: 'required',
  approval_ttl_seconds: approvalTtlSecondsDefault,
};
/** The `results` section when the file omits it (or there is no file). */
export const resultSettingsDefault: ResultSettings = { retention_seconds: resultRetentionSecondsDefault };

export interface LoadConfigOptions {
  readonly dataDir: string;
  /** `--config FILE`; defaults to <dataDir>/postern.yaml. */
  readonly file?: string;
}

/**
 * Reads, parses and checks the configuration. A bad file is refused as a whole with CONFIG_INVALID
 * naming the first bad field (`routes[2].lanes[0].path`); nothing half-loaded is ever used. A missing
 * default file means "no routes yet"; a missing explicit --config file is an error.
 */
export function loadConfig(options: LoadConfigOptions): PosternConfig {
  const read = readConfigText(options);
  return read.text === undefined ? emptyConfig() : parseConfig(read.text, read.file);
}

/** The configuration of "no file": no routes, no hosts, every section at its default. */
export function emptyConfig(file: string | undefined = undefined): PosternConfig {
  return {
    version: 1,
    routes: new Map(),
    sshHosts: new Map(),
    mcpServers: new Map(),
    agents: agentSettingsDefault,
    results: resultSettingsDefault,
    vault: { auto_lock_minutes: vaultAutoLockMinutesDefault },
    file,
  };
}

/**
 * The configuration file's text, bounded; `text` undefined when the default file does not exist
 * (a missing explicit --config file is CONFIG_INVALID). config-integrity.ts compares these bytes
 * with the last accepted copy.
 */
export function readConfigText(options: LoadConfigOptions): { file: string; text: string | undefined } {
  const file = options.file ?? join(options.dataDir, configFileName);
  try {
    return { file, text: readBounded(file, configBytesMax) };
  } catch (error) {
    if (options.file === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT')
      return { file, text: undefined };
    if (error instanceof CodedError) throw error;
    throw new CodedError('CONFIG_INVALID', `cannot read the configuration file (${errnoCode(error)})`, { field: '' });
  }
}

/** Parses YAML text into a checked configuration; `file` is only for messages and resolving nothing else. */
export function parseConfig(text: string, file: string | undefined = undefined): PosternConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    const where = lineCounter.linePos(yamlError.pos[0]);
    const at = ` at line ${where.line}, column ${where.col}`;
    throw new CodedError('CONFIG_INVALID', `the configuration is not valid YAML${at} (${yamlError.code})`, {
      field: '',
    });
  }
  const parsed = configSchema.safeParse(doc.toJS({ maxAliasCount: 16 }) ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue === undefined ? '' : fieldPath(issue.path);
    throw new CodedError(
      'CONFIG_INVALID',
      `${field === '' ? 'the configuration' : field}: ${issue?.message ?? 'invalid'}`,
      { field },
    );
  }
  const routes = new Map<string, Route>();
  for (const [i, settings] of parsed.data.routes.entries()) routes.set(settings.name, deriveRoute(settings, i));
  const sshHosts = new Map(parsed.data.ssh_hosts.map((h) => [h.name, h] as const));
  const mcpServers = new Map(parsed.data.mcp_servers.map((m) => [m.name, m] as const));
  return {
    version: 1,
    routes,
    sshHosts,
    mcpServers,
    agents: parsed.data.agents,
    results: parsed.data.results,
    operator: parsed.data.operator,
    vault: parsed.data.vault,
    file,
  };
}

/** `['routes', 2, 'lanes', 0, 'path']` → `routes[2].lanes[0].path`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

function deriveRoute(settings: RouteSettings, index: number): Route {
  const url = new URL(settings.base_url);
  const protocol = url.protocol as 'http:' | 'https:';
  let caPem: string | undefined;
  if (settings.tls?.ca_file !== undefined) {
    const field = `routes[${index}].tls.ca_file`;
    try {
      caPem = readBounded(settings.tls.ca_file, caFileBytesMax);
    } catch (error) {
      throw new CodedError('CONFIG_INVALID', `${field}: cannot read the CA file (${errnoCode(error)})`, { field });
    }
    if (!caPem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new CodedError('CONFIG_INVALID', `${field}: not a PEM certificate file`, { field });
    }
  }
  return {
    ...settings,
    origin: url.origin,
    protocol,
    // URL gives the bracketed form for IPv6 literals; connect wants the bare address.
    hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (protocol === 'https:' ? 443 : 80) : Number(url.port),
    base_path: url.pathname === '' ? '/' : url.pathname,
    ca_pem: caPem,
  };
}

function readBounded(file: string, bytesMax: number): string {
  const bytes = readFileSync(file);
  if (bytes.length > bytesMax)
    throw new CodedError('CONFIG_INVALID', `the file exceeds ${bytesMax} bytes`, { field: '' });
  return bytes.toString('utf8');
}

function errnoCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,32}$/.test(code) ? code : 'unreadable';
}
