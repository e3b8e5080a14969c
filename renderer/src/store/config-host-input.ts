import type { ApprovalMode, CredentialSummary, InjectionKind } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import { parseMethods, type ConfigEdit } from './config-reducer.js';

/**
 * The Add SSH host form as a person fills it in, checked here the way docs/config.md describes an
 * `ssh_hosts` entry, so a mistake is named next to its field before the broker is asked. The broker
 * checks again (the configuration schema is the authority); its refusal is mapped back to a field
 * with `formFieldOf`.
 */
export interface SshHostDraft {
  name: string;
  /** A host name, an IPv4 address, an IPv6 address (bare or in brackets), optionally with `:port`. */
  host: string;
  /** Empty means the default, 22. */
  port: string;
  user: string;
  credential: string;
  /** Fingerprints separated by commas or blanks, or lines as `ssh-keygen -lf` prints them; empty: accept_new. */
  pins: string;
  approval: ApprovalMode;
}

export type SshHostField = 'name' | 'host' | 'port' | 'user' | 'credential' | 'pins' | 'approval';
export type RouteField =
  | 'name'
  | 'base_url'
  | 'credential'
  | 'injection'
  | 'approval'
  | 'methods'
  | 'aws_region'
  | 'aws_service'
  | 'token_url'
  | 'scopes'
  | 'audience';

/** A refusal of a form's input, by field: the form shows it next to itself and marks the field. */
export interface FormProblem<F extends string> {
  field: F | null;
  code: string;
  message: string;
}

type AddSshHost = Extract<ConfigEdit, { op: 'add_ssh_host' }>;

export const defaultSshPort = 22;
const portMax = 65_535;
const pinsMax = 8;
/** docs/config.md: `[a-z0-9][a-z0-9_-]{0,63}`. */
const entryNamePattern = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** docs/vault.md: a credential name, case-insensitive. */
const credentialNamePattern = /^[a-z0-9][a-z0-9_.-]{0,63}$/i;
const userPattern = /^[A-Za-z0-9._-]{1,64}$/;
const hostNamePattern =
  /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?$/;
const ipv4Pattern = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const fingerprintPattern = /^SHA256:[A-Za-z0-9+/]{43}$/;
/** One line of `ssh-keygen -lf`: bits, fingerprint, comment, (type). */
const keygenLinePattern = /^\d+\s+(SHA256:\S+)(?:\s.*)?$/;

const problem = (field: SshHostField, message: string): FormProblem<SshHostField> => ({
  field,
  code: 'INVALID_ARGUMENT',
  message,
});

/** Whether a text is an IPv6 address (no zone id): hex groups, at most one `::`, an optional IPv4 tail. */
export function isIpv6(text: string): boolean {
  if (!/^[0-9A-Fa-f:.]+$/.test(text) || !text.includes(':')) return false;
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((half) => (half === '' ? [] : half.split(':')));
  const tail = groups.at(-1) ?? '';
  const v4 = tail.includes('.');
  if (v4 && !ipv4Pattern.test(tail)) return false;
  const hex = v4 ? groups.slice(0, -1) : groups;
  if (!hex.every((g) => /^[0-9A-Fa-f]{1,4}$/.test(g))) return false;
  const width = hex.length + (v4 ? 2 : 0);
  return halves.length === 2 ? width <= 7 : width === 8;
}

/**
 * Pure: the address part of the form as the file wants it — `host` without brackets, and the port
 * when the address carried one (`[2001:db8::5]:2222`, `web-1.internal:2222`, `10.0.0.5:2222`).
 */
export function parseSshAddress(
  text: string,
): { ok: true; host: string; port: number | null } | { ok: false; message: string } {
  const trimmed = text.trim();
  if (trimmed === '') return { ok: false, message: 'a host name or IP address is needed' };
  if (trimmed.includes('%'))
    return { ok: false, message: 'an IPv6 zone id (%eth0) is not supported: name a routable address or a host name' };
  const bracketed = /^\[([^\]]*)\](?::(\d+))?$/.exec(trimmed);
  if (bracketed !== null) {
    const inner = bracketed[1] ?? '';
    if (!isIpv6(inner)) return { ok: false, message: `${inner || '[]'} in brackets is not an IPv6 address` };
    return { ok: true, host: inner.toLowerCase(), port: bracketed[2] === undefined ? null : Number(bracketed[2]) };
  }
  if (isIpv6(trimmed)) return { ok: true, host: trimmed.toLowerCase(), port: null };
  const colon = /^([^:]+):(\d+)$/.exec(trimmed);
  const host = colon?.[1] ?? trimmed;
  const port = colon?.[2] === undefined ? null : Number(colon[2]);
  if (ipv4Pattern.test(host) || (hostNamePattern.test(host) && !/^[\d.]+$/.test(host))) return { ok: true, host, port };
  return {
    ok: false,
    message:
      'a host name (web-1.internal), an IPv4 address (10.0.0.5) or an IPv6 address (2001:db8::5 or [2001:db8::5]:22)',
  };
}

/** Pure: the port the form names, from the Port field and any `:port` in the address (which must agree). */
function portOf(field: string, fromAddress: number | null): { ok: true; port: number } | FormProblem<SshHostField> {
  const text = field.trim();
  const typed = text === '' ? null : Number(text);
  if (typed !== null && (!/^\d+$/.test(text) || typed < 1 || typed > portMax))
    return problem('port', `a whole number from 1 to ${portMax} (empty: ${defaultSshPort})`);
  if (fromAddress !== null && (fromAddress < 1 || fromAddress > portMax))
    return problem('host', `the port in the address must be from 1 to ${portMax}`);
  if (fromAddress !== null && typed !== null && typed !== fromAddress && typed !== defaultSshPort) {
    return problem('port', `the address names port ${fromAddress} but Port says ${typed}: keep one`);
  }
  return { ok: true, port: fromAddress ?? typed ?? defaultSshPort };
}

/** Pure: the pinned fingerprints the text names (commas, blanks or `ssh-keygen -lf` lines), or what is wrong. */
export function parsePins(text: string): { ok: true; pins: string[] } | { ok: false; message: string } {
  const tokens = text.split(/\r?\n/).flatMap((line) => {
    const keygen = keygenLinePattern.exec(line.trim());
    return keygen?.[1] !== undefined ? [keygen[1]] : line.split(/[\s,]+/).filter((t) => t !== '');
  });
  const pins = [...new Set(tokens.map((t) => t.replace(/=+$/, '')))];
  const bad = pins.find((pin) => !fingerprintPattern.test(pin));
  if (bad !== undefined)
    return {
      ok: false,
      message: `${bad.slice(0, 20)}${bad.length > 20 ? '…' : ''} is not a fingerprint as ssh-keygen -lf prints it: SHA256: then 43 base64 characters`,
    };
  if (pins.length > pinsMax) return { ok: false, message: `at most ${pinsMax} fingerprints` };
  return { ok: true, pins };
}

/** Pure: the config.edit the draft asks for, or the first field that is wrong (in the form's order). */
export function sshHostEdit(
  draft: SshHostDraft,
): { ok: true; edit: AddSshHost } | ({ ok: false } & FormProblem<SshHostField>) {
  const refuse = (p: FormProblem<SshHostField>) => ({ ok: false as const, ...p });
  const name = draft.name.trim();
  if (!entryNamePattern.test(name))
    return refuse(
      problem('name', 'lower-case letters, digits, _ and -, starting with a letter or digit, at most 64 (e.g. web-1)'),
    );
  const address = parseSshAddress(draft.host);
  if (!address.ok) return refuse(problem('host', address.message));
  const port = portOf(draft.port, address.port);
  if (!('ok' in port)) return refuse(port);
  const user = draft.user.trim();
  if (!userPattern.test(user)) return refuse(problem('user', 'a user name: letters, digits, . _ and -, at most 64'));
  const credential = draft.credential.trim();
  if (!credentialNamePattern.test(credential))
    return refuse(problem('credential', 'the name of an ssh_key credential in the vault (letters, digits, . _ -)'));
  const pins = parsePins(draft.pins);
  if (!pins.ok) return refuse(problem('pins', pins.message));
  const host_key = pins.pins.length === 0 ? ('accept_new' as const) : { pinned: pins.pins };
  return {
    ok: true,
    edit: {
      op: 'add_ssh_host',
      host: { name, host: address.host, port: port.port, user, credential, host_key, approval: draft.approval },
    },
  };
}

/**
 * Pure: which field of a form the broker's refusal names. The broker says `host.port` (the edit's
 * own check), `ssh_hosts[3].host_key.pinned[0]` (the whole file's schema) or `ssh_hosts.name` (a
 * name used twice); the form knows only its own fields.
 */
export function formFieldOf<F extends string>(
  error: Pick<ReplyError, 'field'>,
  fields: Readonly<Record<string, F>>,
): F | null {
  const path = (error.field ?? '').replace(/^(?:ssh_hosts|routes)(?:\[\d+\])?\.|^(?:host|route)\./, '');
  // A nested field (`aws.region`) first, then the section it is in (`aws`).
  const [, head = '', sub] = /^([a-z0-9_]+)(?:\.([a-z0-9_]+))?/.exec(path) ?? [];
  return (sub === undefined ? undefined : fields[`${head}.${sub}`]) ?? fields[head] ?? null;
}

/** The broker's words for the SSH host form's fields. */
export const sshHostFieldsByKey: Readonly<Record<string, SshHostField>> = {
  name: 'name',
  host: 'host',
  port: 'port',
  user: 'user',
  credential: 'credential',
  host_key: 'pins',
  approval: 'approval',
};
export const routeFieldsByKey: Readonly<Record<string, RouteField>> = {
  name: 'name',
  base_url: 'base_url',
  credential: 'credential',
  injection: 'injection',
  approval: 'approval',
  methods: 'methods',
  aws: 'aws_region',
  'aws.region': 'aws_region',
  'aws.service': 'aws_service',
  oauth2: 'token_url',
  'oauth2.token_url': 'token_url',
  'oauth2.scopes': 'scopes',
  'oauth2.audience': 'audience',
};

/**
 * What the form can say about the credential a host entry names, from credentials.list (names,
 * kinds and bindings; never a secret). At use the broker takes a binding to the entry's name, its
 * host, `host:port` or `[host]:port`, any case (execute-ssh-action.ts boundTo); an entry added
 * through config.edit needs the key bound to its host (operator-vault.ts refuseNameOnlyHostBinding:
 * a key bound to the name alone would follow the name to any host), so `name_only` is a warning and
 * every fix binds the host.
 */
export type SshCredentialUse =
  | { state: 'unknown' }
  | { state: 'missing'; credential: string; fix: string }
  | { state: 'wrong_kind'; credential: string; kind: string }
  | { state: 'name_only'; credential: string; name: string; host: string; fix: string }
  | { state: 'unbound'; credential: string; bindings: string[]; fix: string }
  | { state: 'bound'; credential: string; via: string; version_tag: string };

export interface SshCredentialContext {
  /** credentials.list answered (else nothing can be said). */
  listed: boolean;
  credentials: readonly Pick<CredentialSummary, 'name' | 'kind' | 'bindings' | 'version_tag'>[];
  /** The data directory of the running broker, for the command that fixes a binding (null: not known). */
  dataDir: string | null;
}

/** Pure: the entry's name and the host forms a binding may use for this entry (lower case). */
export function sshBindingNames(draft: Pick<SshHostDraft, 'name' | 'host' | 'port'>): {
  name: string | null;
  hosts: string[];
} {
  const name = draft.name.trim().toLowerCase();
  const address = parseSshAddress(draft.host);
  const entry = entryNamePattern.test(name) ? name : null;
  if (!address.ok) return { name: entry, hosts: [] };
  const port = address.port ?? (/^\d+$/.test(draft.port.trim()) ? Number(draft.port.trim()) : defaultSshPort);
  const host = address.host.toLowerCase();
  return { name: entry, hosts: [host, `${host}:${port}`, `[${host}]:${port}`] };
}

/** A word a POSIX shell takes as is, else single-quoted (an IPv6 binding's brackets would glob). */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9._:/@=-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Pure: the credential's state for this entry, and the command that fixes a mismatch. */
export function sshCredentialUse(
  draft: Pick<SshHostDraft, 'name' | 'host' | 'port' | 'credential'>,
  context: SshCredentialContext,
): SshCredentialUse | null {
  const wanted = draft.credential.trim();
  if (wanted === '') return null;
  if (!context.listed) return { state: 'unknown' };
  const dataDir = context.dataDir === null ? '' : ` --data-dir ${shellWord(context.dataDir)}`;
  const { name, hosts } = sshBindingNames(draft);
  const host = hosts[0];
  const target = host === undefined ? 'HOST' : shellWord(host);
  const found = context.credentials.find((c) => c.name.toLowerCase() === wanted.toLowerCase());
  if (found === undefined) {
    return {
      state: 'missing',
      credential: wanted,
      fix: `postern vault add ${shellWord(wanted)} --kind ssh_key --bind ${target} --from-stdin${dataDir} < KEY_FILE`,
    };
  }
  if (found.kind !== 'ssh_key') return { state: 'wrong_kind', credential: found.name, kind: found.kind };
  const via = found.bindings.find((b) => hosts.includes(b.toLowerCase()));
  if (via !== undefined) return { state: 'bound', credential: found.name, via, version_tag: found.version_tag };
  // `vault bind` replaces the list: the fix keeps what the credential is bound to now.
  const fix = `postern vault bind ${shellWord(found.name)} ${[...found.bindings.map(shellWord), target].map((b) => `--bind ${b}`).join(' ')}${dataDir}`;
  if (name !== null && host !== undefined && found.bindings.some((b) => b.toLowerCase() === name)) {
    return { state: 'name_only', credential: found.name, name, host, fix };
  }
  return { state: 'unbound', credential: found.name, bindings: found.bindings, fix };
}

/** The add route form's fields as typed. */
export interface RouteDraft {
  name: string;
  baseUrl: string;
  credential: string;
  injection: InjectionKind;
  approval: ApprovalMode;
  methods: string;
  /** injection aws_sigv4: the signature scope. */
  awsRegion: string;
  awsService: string;
  /** injection oauth2_client_credentials: the token endpoint, scopes (space or comma separated), audience. */
  tokenUrl: string;
  scopes: string;
  audience: string;
}

/** The draft's typed (text) fields. */
export type DraftText = Exclude<keyof RouteDraft, 'injection' | 'approval'>;

export const emptyRouteDraft: RouteDraft = {
  name: '',
  baseUrl: '',
  credential: '',
  injection: 'bearer',
  approval: 'per_call',
  methods: '',
  awsRegion: '',
  awsService: '',
  tokenUrl: '',
  scopes: '',
  audience: '',
};

/**
 * The add_route edit: names trimmed, no methods when none were typed (the broker's default: all), and the section
 * the chosen injection needs (only that one: the broker refuses an aws scope on another injection).
 */
export function routeEdit(draft: RouteDraft): Extract<ConfigEdit, { op: 'add_route' }> {
  const chosen = parseMethods(draft.methods) as Array<'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'>;
  const scopes = draft.scopes.split(/[\s,]+/).filter((scope) => scope !== '');
  const audience = draft.audience.trim();
  const route = {
    name: draft.name.trim(),
    base_url: draft.baseUrl.trim(),
    credential: draft.credential.trim(),
    injection: draft.injection,
    approval: draft.approval,
    ...(chosen.length === 0 ? {} : { methods: chosen }),
    ...(draft.injection === 'aws_sigv4'
      ? { aws: { region: draft.awsRegion.trim(), service: draft.awsService.trim() } }
      : {}),
    ...(draft.injection === 'oauth2_client_credentials'
      ? {
          oauth2: {
            token_url: draft.tokenUrl.trim(),
            ...(scopes.length === 0 ? {} : { scopes }),
            ...(audience === '' ? {} : { audience }),
          },
        }
      : {}),
  };
  return { op: 'add_route', route };
}
