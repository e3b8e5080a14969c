import {
  actorLabel,
  codeSigningSchema,
  type AllowlistEntry,
  type CodeSigning,
  type JournalEvent,
} from '../contract/index.js';

/** The executable a session's process runs, as the broker hashed it (never what a client said). */
export interface ExecutableIdentity {
  readonly path: string;
  /** `sha256:<hex>` of the file's bytes. */
  readonly sha256: string;
  /**
   * macOS: the code-signing identity `codesign` read from the file (null: unsigned, ad-hoc, no team, or it did not
   * verify). Absent where it is not read (Linux): an entry that carries one then never matches.
   */
  readonly signing?: CodeSigning | null;
}

/** What an action is aimed at, read from its recorded target (`route:NAME …`, `host:NAME exec …`). */
export type ActionScope = { readonly kind: 'route' | 'host'; readonly name: string } | null;

/**
 * The entries in force after the allowlist's events, in append order. A removal of an entry that is not in force is
 * skipped (two people removing the same entry), an add of an id already in force is a bug in the writer and throws.
 */
export function foldAllowlist(events: Iterable<JournalEvent>): Map<string, AllowlistEntry> {
  const entries = new Map<string, AllowlistEntry>();
  for (const event of events) {
    if (event.kind === 'ALLOWLIST_ENTRY_ADDED') {
      const p = event.payload;
      if (entries.has(p.entry_id)) throw new Error(`seq ${event.seq}: allowlist entry ${p.entry_id} added twice`);
      entries.set(p.entry_id, {
        entry_id: p.entry_id,
        path: p.path,
        sha256: p.sha256,
        routes: [...p.routes],
        hosts: [...p.hosts],
        added_by: actorLabel(p.actor),
        added_at_ms: event.at_ms,
        from_session: p.from_session ?? null,
        signing: p.signing ?? null,
      });
    } else if (event.kind === 'ALLOWLIST_ENTRY_REMOVED') {
      entries.delete(event.payload.entry_id);
    }
  }
  return entries;
}

/** An entry with no routes and no hosts covers every action of the process. */
export function isUnscoped(entry: Pick<AllowlistEntry, 'routes' | 'hosts'>): boolean {
  return entry.routes.length === 0 && entry.hosts.length === 0;
}

/**
 * Path AND hash: a same-path binary with other bytes, or the same bytes elsewhere, is another executable. An entry
 * added with a code-signing identity also needs that identity now: a re-signed or unsigned copy is another executable.
 */
export function matchesExecutable(
  entry: Pick<AllowlistEntry, 'path' | 'sha256' | 'signing'>,
  exe: ExecutableIdentity,
): boolean {
  if (entry.path !== exe.path || entry.sha256 !== exe.sha256) return false;
  return entry.signing === null || sameSigning(entry.signing, exe.signing ?? null);
}

export function sameSigning(a: CodeSigning | null, b: CodeSigning | null): boolean {
  if (a === null || b === null) return a === b;
  return a.identifier === b.identifier && a.team_id === b.team_id;
}

/** The first unscoped entry this executable matches: its session is approved at open. */
export function unscopedMatch(entries: Iterable<AllowlistEntry>, exe: ExecutableIdentity): AllowlistEntry | undefined {
  for (const entry of entries) if (isUnscoped(entry) && matchesExecutable(entry, exe)) return entry;
  return undefined;
}

/**
 * The first scoped entry this executable matches whose scope names the action's route or host: that one action skips
 * its session card (the session itself stays pending). An action with no route or host (an upstream MCP tool, a
 * refused target) is never covered by a scoped entry.
 */
export function scopedMatch(
  entries: Iterable<AllowlistEntry>,
  exe: ExecutableIdentity,
  scope: ActionScope,
): AllowlistEntry | undefined {
  if (scope === null) return undefined;
  for (const entry of entries) {
    if (isUnscoped(entry) || !matchesExecutable(entry, exe)) continue;
    const names = scope.kind === 'route' ? entry.routes : entry.hosts;
    if (names.includes(scope.name)) return entry;
  }
  return undefined;
}

/** The route or host an action's recorded target names; anything else (an MCP tool, `(invalid)`) is null. */
export function actionScopeOf(target: string): ActionScope {
  const match = /^(route|host):([^\s()][^\s]*)(?:\s|$)/.exec(target);
  if (match === null) return null;
  return { kind: match[1] === 'route' ? 'route' : 'host', name: match[2] ?? '' };
}

/** The actor a decision the allowlist made records: policy, naming the entry (`allowlist:alw_…`). */
export function allowlistActorId(entryId: string): string {
  return `allowlist:${entryId}`;
}

/** Bounds on what the macOS tools may print before it is refused as odd. */
export const darwinToolOutputBytesMax = 64 * 1024;
const pathBytesMax = 4096;

/** A parse of a tool's output: a value, or a refusal saying why (the output itself is never echoed). */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly why: string };

const refused = <T>(why: string): Parsed<T> => ({ ok: false, why });
/** Control characters other than newline and tab: never in what these tools print for a sane file. */
// eslint-disable-next-line no-control-regex
const oddCharacters = /[\u0000-\u0008\u000b-\u001f\u007f]/;

/**
 * The identity in `codesign -d --verbose=2 FILE` (it prints to stderr), run only after `codesign --verify --strict`
 * passed. One `Identifier=` line and at most one `TeamIdentifier=` / `Signature=` line; an ad-hoc signature or a team
 * of `not set` (or none) is no identity (null). Anything else odd — a repeated key, a malformed identifier or team,
 * control characters, too much output — is refused rather than guessed at.
 */
export function parseCodesignDetails(text: string): Parsed<CodeSigning | null> {
  if (text.length > darwinToolOutputBytesMax) return refused('codesign printed more than expected');
  if (oddCharacters.test(text)) return refused('codesign printed control characters');
  const values = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const key = /^(Identifier|TeamIdentifier|Signature)=(.*)$/.exec(line);
    if (key === null) continue;
    const name = key[1] ?? '';
    values.set(name, [...(values.get(name) ?? []), key[2] ?? '']);
  }
  const [identifier, ...moreIds] = values.get('Identifier') ?? [];
  const [team, ...moreTeams] = values.get('TeamIdentifier') ?? [];
  const [signature, ...moreSignatures] = values.get('Signature') ?? [];
  if (identifier === undefined) return refused('codesign named no Identifier');
  if (moreIds.length + moreTeams.length + moreSignatures.length > 0) return refused('codesign repeated a key');
  if (signature === 'adhoc' || team === undefined || team === 'not set') return { ok: true, value: null };
  const signing = codeSigningSchema.safeParse({ identifier, team_id: team });
  return signing.success ? { ok: true, value: signing.data } : refused('codesign named a malformed identity');
}

/**
 * The executable of `lsof -n -P -w -a -p PID -d txt -F n`: the first `txt` file (the main image is mapped first, below
 * dyld and the shared cache), as the kernel names its vnode. The output must be for that pid and name an absolute path.
 */
export function parseLsofExecutable(text: string, pid: number): Parsed<string> {
  if (text.length > darwinToolOutputBytesMax) return refused('lsof printed more than expected');
  if (oddCharacters.test(text)) return refused('lsof printed control characters');
  const lines = text.split('\n').filter((line) => line !== '');
  if (lines[0] !== `p${pid}`) return refused('lsof answered for another process');
  let inText = false;
  for (const line of lines.slice(1)) {
    if (line.startsWith('p')) return refused('lsof answered for more than one process');
    if (line.startsWith('f')) inText = line === 'ftxt';
    else if (line.startsWith('n') && inText) {
      const file = line.slice(1);
      if (!file.startsWith('/') || file.length > pathBytesMax) return refused('lsof named no absolute executable path');
      return { ok: true, value: file };
    }
  }
  return refused('lsof named no executable');
}

/**
 * A process's start as `ps -o lstart= -p PID` prints it with LC_ALL=C (`Mon Jan  6 10:00:00 2025`): one line, kept
 * as text (compared, never parsed into a time). Empty output: no such process (undefined).
 */
export function parsePsStart(text: string): Parsed<string | undefined> {
  const line = text.trim();
  if (line === '') return { ok: true, value: undefined };
  if (!/^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/.test(line))
    return refused('ps printed an odd start time');
  return { ok: true, value: line };
}
