import type { CardPair } from '../contract/index.js';

/** The first bytes of a body a card shows (before any injection: the agent's bytes only). */
export const bodyPreviewBytesMax = 2048;
/** A path or a tool name is shown up to this many characters. */
export const cardTextCharsMax = 4096;
/**
 * An SSH command is shown whole up to this many characters: the channel admits at most
 * SshLimits.commandBytesMax (32 KiB) of UTF-8, never more characters than that, so a command that reaches
 * a card is never cut. A person must never approve a tail they could not see.
 */
export const cardCommandCharsMax = 32 * 1024;
/** Query parameters and agent-set headers shown per card; more are summarized in one last pair. */
export const cardPairsMax = 32;
/** A query or header name or value is shown up to this many characters. */
export const cardPairCharsMax = 512;

/**
 * What a card shows beyond the journaled state. Held in memory only, never journaled: the body and
 * the command can hold anything the agent sent. Built before injection, so no secret is in it.
 */
export interface CardPreview {
  /** route:<name> or host:<name>. */
  readonly target: string;
  readonly method: string | null;
  readonly path: string | null;
  /** HTTP: the query as the agent sent it (the credential's query parameter is added later, never here). */
  readonly query: readonly CardPair[];
  /**
   * HTTP: the headers the agent set (e.g. X-HTTP-Method-Override), names and bounded values. The
   * agent can never set the credential's header (FORBIDDEN_HEADER), so no secret is here.
   */
  readonly headers: readonly CardPair[];
  readonly command: string | null;
  readonly body_preview: string | null;
  readonly body_bytes: number;
  /** The credential's NAME from configuration, never its value. */
  readonly credential: string;
  readonly retry_of: string | null;
}

/** The request as the agent sent it, taken before injection: what a person approves. */
export interface HttpPreviewRequest {
  readonly method: string;
  readonly path: string;
  readonly query: ReadonlyArray<readonly [string, string]>;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Uint8Array;
}

/**
 * What a card shows of an HTTP request beside its target and body preview, bounded as the card shows it. The
 * executor journals it in ACTION_ACCEPTED's sealed payload (`request_view`) so a card rebuilt from the journal shows
 * the same request; the body itself is never journaled, only its size.
 */
export interface HttpRequestView {
  readonly query: readonly CardPair[];
  readonly headers: readonly CardPair[];
  readonly body_bytes: number;
}

export function httpRequestView(request: HttpPreviewRequest): HttpRequestView {
  return {
    query: boundedPairs(request.query),
    headers: boundedPairs(request.headers),
    body_bytes: request.body.length,
  };
}

/**
 * The live card of an HTTP request: `view` is the request's httpRequestView, built once at admission and sealed in
 * ACTION_ACCEPTED, so the card a person sees now and the one rebuilt from the journal show the same pairs.
 */
export function httpCardPreview(
  route: { name: string; credential: string },
  request: Pick<HttpPreviewRequest, 'method' | 'path' | 'body'>,
  view: HttpRequestView,
): CardPreview {
  return {
    ...httpPreviewOf(route, request.method, bounded(request.path), view),
    body_preview: bodyPreview(request.body),
  };
}

/** The one shape of an HTTP card's preview, live (httpCardPreview) or rebuilt from the journal (previewFromTarget). */
function httpPreviewOf(
  route: { name: string; credential: string },
  method: string | null,
  path: string | null,
  view: HttpRequestView,
): CardPreview {
  return {
    target: `route:${route.name}`,
    method,
    path,
    query: view.query.map(copyPair),
    headers: view.headers.map(copyPair),
    command: null,
    body_preview: null,
    body_bytes: view.body_bytes,
    credential: route.credential,
    retry_of: null,
  };
}

export function sshCardPreview(host: { name: string; credential: string }, command: string): CardPreview {
  return {
    target: `host:${host.name}`,
    method: null,
    path: null,
    query: [],
    headers: [],
    command: boundedCommand(command),
    body_preview: null,
    body_bytes: 0,
    credential: host.credential,
    retry_of: null,
  };
}

/**
 * An upstream MCP tool call as the agent sent it: the server, the tool (as `command`) and the arguments as
 * pretty JSON in the body preview (bounded like a body). Built before anything is resolved from the vault.
 */
export function mcpCardPreview(
  server: { name: string; credentials: readonly string[] },
  tool: string,
  args: Readonly<Record<string, unknown>>,
): CardPreview {
  const json = Buffer.from(JSON.stringify(args, null, 2), 'utf8');
  return {
    target: `mcp:${server.name}`,
    method: null,
    path: null,
    query: [],
    headers: [],
    command: bounded(tool),
    body_preview: Object.keys(args).length === 0 ? null : bodyPreview(json),
    body_bytes: Object.keys(args).length === 0 ? 0 : json.length,
    credential: server.credentials.length === 0 ? '(none)' : server.credentials.join(', '),
    retry_of: null,
  };
}

/**
 * The first bodyPreviewBytesMax bytes as UTF-8 when they decode cleanly (a multi-byte character cut
 * at the edge is dropped), else a note "N bytes of binary". null for an empty body.
 */
export function bodyPreview(body: Uint8Array): string | null {
  if (body.length === 0) return null;
  let head = body.subarray(0, bodyPreviewBytesMax);
  for (let cut = 0; cut < 4; cut += 1) {
    try {
      const text = new TextDecoder('utf-8', { fatal: true }).decode(head);
      return body.length > head.length ? `${text}… (${body.length} bytes)` : text;
    } catch {
      if (body.length <= bodyPreviewBytesMax) break;
      head = head.subarray(0, head.length - 1);
    }
  }
  return `${body.length} bytes of binary`;
}

/**
 * The whole command up to cardCommandCharsMax. Beyond it (a bug upstream: admission refuses such a command)
 * the cut says how much is hidden and how long the command is, so a card never passes a cut for the whole.
 */
export function boundedCommand(command: string, charsMax = cardCommandCharsMax): string {
  if (command.length <= charsMax) return command;
  // Never split a surrogate pair: the shown part stays valid text.
  const end = /[\uD800-\uDBFF]/.test(command.charAt(charsMax - 1)) ? charsMax - 1 : charsMax;
  return `${command.slice(0, end)}… [${command.length - end} more characters not shown; ${command.length} in all]`;
}

function bounded(text: string, charsMax = cardTextCharsMax): string {
  return text.length <= charsMax ? text : `${text.slice(0, charsMax)}…`;
}

/**
 * At most cardPairsMax pairs, each side at most cardPairCharsMax characters. A cut side is the first characters alone
 * (never a surrogate pair split), the pair saying how many characters of each side are hidden. Hidden pairs are never
 * dropped silently: the last pair says how many more there are, in its third element `{pairs_hidden}` (events.ts
 * cardPairsHiddenSchema), so a person knows the card is cut and no agent's pair can say it for the broker.
 */
export function boundedPairs(pairs: ReadonlyArray<readonly [string, string]>): CardPair[] {
  const shown = pairs.length <= cardPairsMax ? pairs : pairs.slice(0, cardPairsMax - 1);
  const out = shown.map(([name, value]): CardPair => {
    const n = cutText(name, cardPairCharsMax);
    const v = cutText(value, cardPairCharsMax);
    return n.hidden === 0 && v.hidden === 0
      ? [n.text, v.text]
      : [n.text, v.text, { name_hidden: n.hidden, value_hidden: v.hidden }];
  });
  const hidden = pairs.length - shown.length;
  // The count is the third element, which only the broker writes: an agent's own "…" pair never passes for it.
  if (hidden > 0) out.push(['…', `${hidden} more not shown`, { pairs_hidden: hidden }]);
  return out;
}

/** The first `charsMax` characters (one fewer rather than split a surrogate pair) and how many are not shown. */
function cutText(text: string, charsMax: number): { text: string; hidden: number } {
  if (text.length <= charsMax) return { text, hidden: 0 };
  const end = /[\uD800-\uDBFF]/.test(text.charAt(charsMax - 1)) ? charsMax - 1 : charsMax;
  return { text: text.slice(0, end), hidden: text.length - end };
}

/** A mutable copy of a pair, its cut kept (what the contract's schemas and the journal take). */
export function copyPair([name, value, cut]: CardPair): CardPair {
  return cut === undefined ? [name, value] : [name, value, { ...cut }];
}

/**
 * A preview for a ticket the queue only knows from the journal (its executor returned, or a restart): the sanitized
 * target "route:<name> <METHOD> <path>", "host:<name> exec <digest>" or "mcp:<server> call <tool> <digest>" as
 * ACTION_ACCEPTED recorded it (an MCP call's tool name is in its target; its arguments are not), and for HTTP the
 * query, headers and body size its sealed `request_view` kept (`view`; absent when it could not be read: the card
 * then says why, broker/queue build-card.ts). The body preview is never journaled.
 */
export function previewFromTarget(
  target: string,
  credentialOf: (targetName: string) => string,
  view?: HttpRequestView,
): CardPreview {
  const [name = target, verb = null, ...rest] = target.split(' ');
  const isHttp = name.startsWith('route:');
  const isMcp = name.startsWith('mcp:') && verb === 'call';
  if (isHttp && view !== undefined) {
    const route = { name: name.slice('route:'.length), credential: credentialOf(name) };
    return httpPreviewOf(route, verb, rest.length > 0 ? rest.join(' ') : null, view);
  }
  return {
    target: name,
    method: isHttp ? verb : null,
    path: isHttp && rest.length > 0 ? rest.join(' ') : null,
    query: [],
    headers: [],
    command: isMcp ? (rest[0] ?? null) : null,
    body_preview: null,
    body_bytes: 0,
    credential: credentialOf(name),
    retry_of: null,
  };
}
