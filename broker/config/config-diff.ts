import { configChangeValueCharsMax } from '../contract/config-constants.js';
import { operatorSchema } from './config-schema.js';
import type { PosternConfig } from './load-config.js';

/**
 * The `operator` section a configuration without one runs with (no file, the empty configuration an untrusted run
 * compares against): the schema's own defaults, so a file that leaves the section out, or spells out its defaults,
 * shows no change of it (`unattended_decisions: false` is no change a person must read).
 */
const operatorDefault: Record<string, unknown> = operatorSchema.parse({});

/** One field that differs, as bounded text (a configuration holds names and addresses, never a secret). */
export interface FieldChange {
  readonly field: string;
  readonly before: string | null;
  readonly after: string | null;
  /** What the value as it will be means when it is wider than it reads (an SSH command rule's `*`). */
  readonly note?: string;
}

export interface EntryChange {
  readonly name: string;
  readonly change: 'added' | 'removed' | 'changed';
  readonly fields: FieldChange[];
}

/** What a person reads on the pending-change card: every route, SSH host, MCP server and settings section changed. */
export interface ConfigChanges {
  readonly routes: EntryChange[];
  readonly ssh_hosts: EntryChange[];
  readonly mcp_servers: EntryChange[];
  readonly settings: EntryChange[];
}

/**
 * A field's value on the card is whole up to this (any rule whose text needs no escapes fits); a longer one is cut
 * with a marker that says so and where the whole value is: the card must never pass a cut rule off as the whole.
 */
export const changeValueCharsMax = configChangeValueCharsMax;
/** Fields loading derives from base_url and tls.ca_file: the card shows what the file says instead. */
const derivedRouteFields = new Set(['origin', 'protocol', 'hostname', 'port', 'base_path', 'ca_pem']);
/** The fields a person checks first lead the list, in this order; the rest follow by name. */
const leadingFields = [
  'transport',
  'command',
  'args',
  'env',
  'url',
  'base_url',
  'host',
  'port',
  'user',
  'credential',
  'injection',
  'approval',
  'host_key',
  'methods',
  'rules',
  'commands',
  'rules_may_loosen',
  'lanes',
  'tools',
];
/**
 * List fields shown one element per field (`rules[2]`, an SSH host's `commands[3]`, an MCP server's `tools[0]`), so a
 * changed rule is its own line on the card, whole, not a slice of the whole list.
 */
const elementFields = new Set(['rules', 'commands', 'tools']);
/** Map fields shown one key per field (`env.API_TOKEN`): a person sees which variable a change adds or re-points. */
const keyedFields = new Set(['env']);

/**
 * The difference between the accepted configuration and another one (the file as it is now), entry
 * by entry and field by field. Pure: both sides are already parsed, defaults filled in, so a field
 * the file leaves out and one that spells out the default compare equal.
 */
export function diffConfigs(before: PosternConfig, after: PosternConfig): ConfigChanges {
  const settings: EntryChange[] = [];
  for (const section of ['operator', 'vault', 'agents', 'results'] as const) {
    const side = (c: PosternConfig) => (section === 'operator' ? (c.operator ?? operatorDefault) : c[section]);
    const fields = diffFields(asRecord(side(before)), asRecord(side(after)));
    if (fields.length > 0) settings.push({ name: section, change: 'changed', fields });
  }
  return {
    routes: diffEntries(before.routes, after.routes, derivedRouteFields),
    ssh_hosts: diffEntries(before.sshHosts, after.sshHosts, new Set(), sshCommandNote),
    mcp_servers: diffEntries(before.mcpServers, after.mcpServers, new Set(), mcpServerNote),
    settings,
  };
}

/**
 * What a `*` in an SSH command rule matches (broker/actions/ssh-command-policy.ts, globMatches), said where a person
 * accepts the rule: a shell reader takes `*` for a glob that stops at `/` and a trailing `*` for "anything after",
 * and neither is so. Strict (the default): one word, possibly empty, of the wildcard characters, `/` included, and no
 * shell syntax, nor the `=` that makes a word before the command an assignment; loose (the rule's rules_may_loosen:
 * true): options, such an `=` and `..` segments too.
 */
export const sshCommandStarNotes = {
  strict:
    'each * is one word, possibly empty, of letters, digits and _ - . / : , @ + =: it crosses / (subdirectories match) but never takes a space or shell syntax (; & | < > ( ) $ ` quotes \\ # ~ * ? [ ] { } ! ^ %), so echo * never matches "echo a; rm -rf /" nor "echo a b"; it never takes a .. path segment, and one that begins a word never begins it with - or + (an option) or = (zsh reads =ls as the path of ls); nor does it supply the = of a NAME=value word before the command word, which the shell sets in the environment of the command (* /opt/app/run never matches "LD_PRELOAD=/x.so /opt/app/run"); the rest is literal and the whole command must match',
  loose:
    'each * is one word, possibly empty, of letters, digits and _ - . / : , @ + =: it crosses / (subdirectories match) but never takes a space or shell syntax (; & | < > ( ) $ ` quotes \\ # ~ * ? [ ] { } ! ^ %), so echo * never matches "echo a; rm -rf /"; rules_may_loosen: true, so a * DOES take options (- +), a word beginning with =, the = of a NAME=value word before the command word (* /opt/app/run matches "LD_PRELOAD=/x.so /opt/app/run") and .. path segments: tar * matches "tar --checkpoint-action=exec=sh", cat /var/log/* matches "cat /var/log/../../etc/shadow"; the whole command must match',
} as const;

/** Said beside a stdio server's `expose_env_credentials: true` on the card: what accepting it hands over. */
export const exposeEnvCredentialsNote =
  "every {credential:NAME} in this server's env is put in its child's environment, which every process running as " +
  'you can read (/proc/PID/environ), the agent included: those credentials are exposed to it for as long as the child runs';

/** Said beside each `env` variable whose value holds a `{credential:NAME}` (added or re-pointed). */
export const envCredentialNote =
  "this credential goes into the child's environment, which every process running as you can read " +
  '(/proc/PID/environ), the agent included, for as long as the child runs';

/** The note of an MCP server's `expose_env_credentials: true`, and of an env variable that carries a credential. */
function mcpServerNote(field: string, value: unknown): string | undefined {
  if (field === 'expose_env_credentials' && value === true) return exposeEnvCredentialsNote;
  if (field.startsWith('env.') && typeof value === 'string' && value.includes('{credential:')) return envCredentialNote;
  return undefined;
}

/** The note of an SSH host's `commands[i]` whose pattern has a `*`. */
function sshCommandNote(field: string, value: unknown): string | undefined {
  if (!/^commands\[\d+\]$/.test(field) || typeof value !== 'object' || value === null) return undefined;
  const rule = value as { command?: unknown; rules_may_loosen?: unknown };
  if (typeof rule.command !== 'string' || !rule.command.includes('*')) return undefined;
  return sshCommandStarNotes[rule.rules_may_loosen === true ? 'loose' : 'strict'];
}

function diffEntries(
  before: ReadonlyMap<string, object>,
  after: ReadonlyMap<string, object>,
  skip: ReadonlySet<string>,
  note?: (field: string, value: unknown) => string | undefined,
): EntryChange[] {
  const changes: EntryChange[] = [];
  const names = [...new Set([...before.keys(), ...after.keys()])];
  for (const name of names) {
    const a = before.get(name);
    const b = after.get(name);
    const fields = diffFields(
      a === undefined ? undefined : asRecord(a, skip),
      b === undefined ? undefined : asRecord(b, skip),
      note,
    );
    if (a === undefined) changes.push({ name, change: 'added', fields });
    else if (b === undefined) changes.push({ name, change: 'removed', fields });
    else if (fields.length > 0) changes.push({ name, change: 'changed', fields });
  }
  return changes;
}

function diffFields(
  before: Record<string, unknown> | undefined,
  after: Record<string, unknown> | undefined,
  note?: (field: string, value: unknown) => string | undefined,
): FieldChange[] {
  const keys = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])].filter((k) => k !== 'name');
  keys.sort((x, y) => rank(x) - rank(y) || compareFieldNames(x, y));
  const out: FieldChange[] = [];
  for (const field of keys) {
    const a = text(before?.[field]);
    const b = text(after?.[field]);
    // Compared whole; only what the card shows is cut.
    if (a === b) continue;
    const said = after === undefined ? undefined : note?.(field, after[field]);
    out.push({ field, before: cut(a), after: cut(b), ...(said === undefined ? {} : { note: said }) });
  }
  return out;
}

/**
 * ICU's root order of the ASCII punctuation and symbols (all before digits, digits before letters): what
 * localeCompare('en') gives them, so the card keeps the order it had with localeCompare.
 */
const symbolOrder = '_-,;:!?.\'"()[]{}@*/\\&#%`^+<=>|~$';

/** A field name's parts: each run of digits whole, every other character on its own. */
const parts = (name: string): string[] => name.match(/\d+|[^\d]/gu) ?? [];

/** A part's place before case: its class (symbols, digits, letters, the rest) and its key within the class. */
function primaryOf(part: string): [number, string] {
  if (/^\d/.test(part)) {
    // By value, as text so a run of any length compares exactly: fewer significant digits first, then digit by digit.
    const value = part.replace(/^0+(?=\d)/, '');
    return [1, `${String(value.length).padStart(6, '0')}:${value}`];
  }
  const lower = part.toLowerCase();
  if (lower >= 'a' && lower <= 'z') return [2, lower];
  const symbol = symbolOrder.indexOf(part);
  if (symbol >= 0) return [0, String(symbol).padStart(3, '0')];
  return [3, lower];
}

/**
 * Field names in reading order, as localeCompare('en', { numeric: true }) put them for the ASCII names a configuration
 * holds: symbols before digits before letters, a run of digits by its value (`rules[2]` before `rules[10]`), letters
 * regardless of case; only names equal so differ by case, lower case first. Not localeCompare itself: its first call
 * loads ICU's collation, ~7 ms of the card's cold start with no broker running (issue 18).
 */
export function compareFieldNames(x: string, y: string): number {
  const xs = parts(x);
  const ys = parts(y);
  for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
    const [classX, keyX] = primaryOf(xs[i] as string);
    const [classY, keyY] = primaryOf(ys[i] as string);
    const order = classX - classY || byCodeUnit(keyX, keyY);
    if (order !== 0) return order;
  }
  if (xs.length !== ys.length) return xs.length - ys.length;
  // Equal but for case, or for a digit run's leading zeros, which ICU ignores at every level (`rules[02]` and
  // `rules[2]` are equal to it, `2a` comes before `02A`): the first letter that differs in case, lower case first.
  for (let i = 0; i < xs.length; i++) {
    const a = xs[i] as string;
    const b = ys[i] as string;
    if (a !== b && !/^\d/.test(a)) return byCodeUnit(b, a);
  }
  return 0;
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function rank(field: string): number {
  const i = leadingFields.indexOf(field.replace(/(\[\d+\]|\..*)$/, ''));
  return i < 0 ? leadingFields.length : i;
}

function asRecord(value: object | undefined, skip: ReadonlySet<string> = new Set()): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(value ?? {})
      .filter(([k, v]) => !skip.has(k) && v !== undefined)
      .flatMap(([k, v]): Array<readonly [string, unknown]> => {
        if (elementFields.has(k) && Array.isArray(v)) return v.map((item, i) => [`${k}[${i}]`, item] as const);
        if (keyedFields.has(k) && typeof v === 'object' && v !== null)
          return Object.entries(v).map(([key, item]) => [`${k}.${key}`, item] as const);
        return [[k, v] as const];
      }),
  );
}

/** A value as text: strings as they are, the rest as JSON; absent is null. */
function text(value: unknown): string | null {
  if (value === undefined) return null;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The value whole, or its head and a marker: "… [cut: 1,234 of 5,330 characters not shown; the whole value is in the file]". */
function cut(value: string | null): string | null {
  return value === null ? null : cutToChars(value, changeValueCharsMax, '; the whole value is in the file');
}

/**
 * `value` whole when it fits in `charsMax`, else its head and a marker that says it is cut, by how much and (`where`)
 * where the whole is: "… [cut: 1,234 of 5,330 characters not shown<where>]" — never a bare "…". The result fits.
 */
export function cutToChars(value: string, charsMax: number, where = ''): string {
  if (value.length <= charsMax) return value;
  const marker = (shown: number) =>
    `… [cut: ${(value.length - shown).toLocaleString('en-US')} of ${value.length.toLocaleString('en-US')} characters not shown${where}]`;
  const shown = charsMax - marker(0).length; // marker(0) has the most digits any marker can have
  return `${value.slice(0, shown)}${marker(shown)}`;
}
