import {
  pairCut,
  pairsHidden,
  type ApprovalCard,
  type BrokerApiMethod,
  type CardPair,
  type ConfigPending,
} from '../../broker/contract/index.js';
import { commandNotKeptText } from '../../broker/contract/command-not-kept.js';
import { dateTime } from '../../broker/contract/time-words.js';
import { commandSize, visibleCommand } from '../../broker/contract/visible-command.js';

/** What main's confirmation dialog says: worded from main's own data, never from text the renderer sent. */
export interface DecisionDialog {
  readonly message: string;
  readonly detail: string;
  readonly confirmLabel: string;
  /** The dialog's buttons, Cancel (the default) first; the confirm button only when the dialog shows what it confirms. */
  readonly buttons: readonly string[];
  /** The index in `buttons` that confirms, or null: then nothing the person presses decides. */
  readonly confirmId: number | null;
}

const verbs: Partial<Record<BrokerApiMethod, string>> = {
  'approvals.approve': 'Approve',
  'approvals.reject': 'Reject',
  'approvals.cancel': 'Cancel',
  'approvals.abandon': 'Abandon',
  'actions.attest': 'Attest the outcome of',
  'actions.reconcile': 'Reconcile',
  'actions.retry': 'Retry with the same key',
  'sessions.approve': 'Approve the agent session',
  'sessions.revoke': 'Revoke the agent session',
  'vault.init': 'Create the vault',
  'vault.unlock': 'Unlock the vault',
  'vault.lock': 'Lock the vault',
  'config.accept': 'Accept the configuration change',
  'credentials.add': 'Add a credential',
  'credentials.remove': 'Remove the credential',
  'config.edit': 'Change the configuration',
  'credential_requests.provision': "Answer the agent's credential request",
  'credential_requests.decline': "Decline the agent's credential request",
  'allowlist.add': 'Always allow the executable of',
  'allowlist.remove': 'Remove the process allowlist entry',
};

/** The card's "what it does" line (target and command, or method and path) is shown whole up to this, or not offered. */
const detailCharsMax = 600;
/** Any other line (credential, agent, reason) is cut here, saying so. */
const otherLineCharsMax = 200;

/**
 * The words and buttons of the dialog for one decision. A ticket's decision names what the card says the action does
 * (target, method and path or command, credential) from main's own read of the queue: a compromised renderer can ask
 * for "approve #12" but cannot make the dialog describe #12 as something else. Agent-chosen text is marked as the card
 * marks it (`\n`, `\x1b`, `\u{202e}`, `[4000 spaces]`). Approving needs the whole of what the action does on this
 * dialog: when it does not fit (or main cannot read the ticket), the dialog says so, sends the person to the card and
 * offers no Approve; a refusal (reject, cancel, abandon) stays available on a cut line that says it is cut. Secrets in
 * the input (a credential's value) are never shown. Pure.
 */
export function describeDecision(
  method: BrokerApiMethod,
  input: unknown,
  card: ApprovalCard | undefined,
  configChange?: ConfigPending['change'],
): DecisionDialog {
  const verb = verbs[method] ?? method;
  const fields = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const confirmLabel = verb.split(' ')[0] ?? 'Confirm';
  const ticket = typeof fields['ticket'] === 'number' ? fields['ticket'] : undefined;
  if (method === 'approvals.approve' && ticket !== undefined) {
    if (card === undefined) return unshowable(ticket, [`Postern could not read ticket #${ticket} from the queue.`]);
    // No command to show (only its digest): nothing here would say what runs, so nothing here approves it.
    if (card.channel !== 'http' && card.command === null)
      return unshowable(ticket, [actionLine(card), ...cardLines(card)]);
    if (actionLine(card).length > detailCharsMax)
      return unshowable(ticket, [tooLong(card, ticket), ...cardLines(card)]);
  }
  const subject =
    ticket !== undefined
      ? ` ticket #${ticket}`
      : typeof fields['action_id'] === 'string'
        ? ` ${fields['action_id']}`
        : typeof fields['request_id'] === 'string'
          ? ` ${fields['request_id']}`
          : '';
  const named =
    typeof fields['name'] === 'string'
      ? ` “${fields['name']}”`
      : typeof fields['session_id'] === 'string'
        ? ` ${fields['session_id']}`
        : '';
  const lines: string[] = [];
  if (card !== undefined) lines.push(cutActionLine(card), ...cardLines(card));
  if (typeof fields['reason'] === 'string') lines.push(cutLine(`Reason: ${marked(fields['reason'])}`));
  if (method === 'config.accept') lines.push(...configChangeLines(configChange, fields['digest']));
  return {
    message: `${verb}${subject}${named}?`,
    detail: lines.join('\n'),
    confirmLabel,
    buttons: ['Cancel', confirmLabel],
    confirmId: 1,
  };
}

/** An approval this dialog cannot show whole: it says why and where to read it, and offers only Cancel. */
function unshowable(ticket: number, lines: string[]): DecisionDialog {
  return {
    message: `Ticket #${ticket} cannot be approved in this dialog`,
    detail: lines.join('\n'),
    confirmLabel: 'Approve',
    buttons: ['Cancel'],
    confirmId: null,
  };
}

/** "host:web: the command is 4,118 characters on 2 lines, too long to show whole here …", and where to read it. */
function tooLong(card: ApprovalCard, ticket: number): string {
  const what =
    card.channel === 'http'
      ? `the path of ${marked(card.method ?? '')} is ${commandSize(card.path ?? '')}`
      : `the ${card.channel === 'mcp' ? 'call' : 'command'} is ${commandSize(card.command ?? '')}`;
  return [
    `${cutLine(marked(card.target))}: ${what}: too long to show whole in this dialog, so it cannot be approved here`,
    '(a dialog that showed only part of it could hide what runs).',
    `Read it whole on ticket #${ticket}'s card in the Postern window, and reject it there if it is not what you expect;`,
    `or read it with \`postern approvals list\` and approve it from a terminal: \`postern approvals approve ${ticket}\`.`,
  ].join('\n');
}

/** What the action does, marked: `route:docs: POST /documents/7`, `host:web: uptime[4000 spaces]; rm -rf /`. */
function actionLine(card: ApprovalCard): string {
  if (card.channel !== 'http' && card.command === null) return `${marked(card.target)}: (${commandNotKept(card)})`;
  const what = card.channel === 'http' ? `${card.method ?? ''} ${card.path ?? ''}` : (card.command ?? '');
  return marked(`${card.target}: ${what}`.trim());
}

/**
 * An SSH card rebuilt from the journal (a blocked head after its executor returned, or after a restart) has no
 * command, only its digest: the dialog says so in the words the card and `postern approvals list` use, never a blank,
 * and its acceptance time as the card writes it (local, 24-hour, the zone named), not as the terminal's ISO.
 */
function commandNotKept(card: ApprovalCard): string {
  return commandNotKeptText({ ...card, accepted: dateTime(card.accepted_at_ms) });
}

/** The action line whole, or (for a refusal) its head and plainly how much is not shown and where it is. */
function cutActionLine(card: ApprovalCard): string {
  const line = actionLine(card);
  if (line.length <= detailCharsMax) return line;
  const rest = (line.length - detailCharsMax).toLocaleString('en-US');
  return `${line.slice(0, detailCharsMax)}… [cut: ${rest} more characters not shown here; the whole of it is on the card in the Postern window]`;
}

function cardLines(card: ApprovalCard): string[] {
  // An HTTP request is more than its method and path: the query, the headers the agent set and the body are what the
  // card shows too, so the dialog a compromised renderer cannot redraw names them as well.
  const lines = card.channel === 'http' ? httpRequestLines(card) : [];
  lines.push(cutLine(`Credential: ${marked(card.credential)}`));
  if (card.session !== null)
    lines.push(
      cutLine(`Agent: ${marked(card.session.client_name ?? card.session.exe ?? 'unknown')} (pid ${card.session.pid})`),
    );
  if (card.retry_of !== null) lines.push(cutLine(`A retry of ${marked(card.retry_of)}`));
  return lines;
}

/** Query, headers and body preview of an HTTP card, each one line, marked and cut as any other line. */
function httpRequestLines(card: ApprovalCard): string[] {
  const lines: string[] = [];
  const query = card.query.filter((pair) => pairsHidden(pair) === null);
  const headers = card.headers.filter((pair) => pairsHidden(pair) === null);
  if (query.length > 0) lines.push(cutLine(`Query: ${query.map(queryPairText).join('&')}`));
  if (headers.length > 0) lines.push(cutLine(`Headers: ${headers.map(headerPairText).join('; ')}`));
  // The broker's count of the pairs the card did not show, on a line of its own that no cut can drop and no agent's
  // pair can write (it is read from the summary pair's third element, never from a pair's text).
  const more = [
    hiddenCount(card.query, 'query parameter', 'query parameters'),
    hiddenCount(card.headers, 'header', 'headers'),
  ].filter((text) => text !== null);
  if (more.length > 0) lines.push(`${more.join(' and ')} not shown`);
  if (card.body_preview !== null)
    lines.push(cutLine(`Body (${card.body_bytes.toLocaleString('en-US')} bytes): ${marked(card.body_preview)}`));
  // A card rebuilt from the journal that could not read the request back: no query line must not read as none.
  if (card.request_details === 'sealed')
    lines.push('Query and headers: sealed in the journal while the vault is locked (unlock to see them)');
  if (card.request_details === 'sealed_for_good')
    lines.push(
      'Query and headers: sealed in the journal for good (the broker run that recorded them ended before any audit key existed; no unlock opens them)',
    );
  if (card.request_details === 'not_recorded')
    lines.push('Query and headers: not recorded (an older broker admitted this call)');
  return lines;
}

/**
 * A query pair as `name=value`, each side percent-encoded as it is sent (as `postern approvals list` prints it), a side
 * the card cut followed by how many characters it hides. Encoded, an agent's text holds no space, `[`, `&` or `=` of
 * its own, so `1 [cut: 9 more characters not shown]` or `1&b=2` cannot pass for the broker's note or another pair.
 */
function queryPairText(pair: CardPair): string {
  const cut = pairCut(pair);
  return `${percentEncoded(pair[0])}${cutNote(cut.name_hidden)}=${percentEncoded(pair[1])}${cutNote(cut.value_hidden)}`;
}

/**
 * A header pair as `name: "value"` (as `postern approvals list` prints it), a side the card cut followed by its note. A
 * value may hold any visible ASCII, so `1 [cut: 9 more characters not shown]` or `1; x-b: 2` would pass for the
 * broker's note or another header: the value is a JSON string (its own quotes escaped), and a name that is not an
 * HTTP token (an older card's summary pair "…") one too, so only the broker's notes and separators stand outside
 * quotes. Then marked, as any agent text (a bidi override, a long run of spaces).
 */
function headerPairText(pair: CardPair): string {
  const [k, v] = pair;
  const cut = pairCut(pair);
  const name = httpToken.test(k) ? k : JSON.stringify(k);
  return `${marked(name)}${cutNote(cut.name_hidden)}: ${marked(JSON.stringify(v))}${cutNote(cut.value_hidden)}`;
}

/** An RFC 9110 token (tchar+), what header validation admits as a name. */
const httpToken = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Each character percent-encoded; a lone surrogate (an older journal's cut could leave one) as U+FFFD's encoding. */
function percentEncoded(text: string): string {
  return [...text].map((c) => encodeURIComponent(/^[\uD800-\uDFFF]$/.test(c) ? '\uFFFD' : c)).join('');
}

function cutNote(hidden: number): string {
  return hidden === 0 ? '' : ` [cut: ${hidden.toLocaleString('en-US')} more characters not shown]`;
}

/** "2 more query parameters", from the broker's summary pair; null when the card shows them all. */
function hiddenCount(pairs: readonly CardPair[], one: string, many: string): string | null {
  const n = pairs.reduce((sum, pair) => sum + (pairsHidden(pair) ?? 0), 0);
  return n === 0 ? null : `${n.toLocaleString('en-US')} more ${n === 1 ? one : many}`;
}

function cutLine(line: string): string {
  return line.length <= otherLineCharsMax ? line : `${line.slice(0, otherLineCharsMax)}… [cut]`;
}

/**
 * Agent-chosen text as the card marks it: a line break, a terminal escape or a bidi override (which would fake a
 * line or read backwards) and a long run of spaces (which would push a tail out of sight) become visible escapes.
 * The card keeps a real line break after `\n`; the dialog does not, so agent text never starts a line of its own.
 */
function marked(text: string): string {
  return visibleCommand(text)
    .filter((piece) => !(piece.kind === 'text' && piece.text === '\n'))
    .map((piece) => piece.text)
    .join('');
}

/**
 * What accepting names, from main's own read of `config.pending`: the file and which entries and fields differ (not
 * their values, which the card and `postern config pending` show whole). Past the dialog's room the list says it is
 * cut and where the whole is.
 */
function configChangeLines(change: ConfigPending['change'] | undefined, digest: unknown): string[] {
  if (change === null || change === undefined) return ['Postern could not read the pending change from main.'];
  const lines = [`${marked(change.file)} (${change.digest.slice(0, 'sha256:'.length + 16)}…)`];
  if (change.digest !== digest)
    lines.push('The file changed since the card was drawn: accepting will be refused; read the card again.');
  const entries: string[] = [];
  for (const [section, list] of [
    ['route', change.routes],
    ['SSH host', change.ssh_hosts],
    ['MCP server', change.mcp_servers],
    ['settings', change.settings],
  ] as const)
    for (const entry of list)
      entries.push(`${section} ${marked(entry.name)} ${entry.change}: ${entry.fields.map((f) => f.field).join(', ')}`);
  const listed = entries.join('\n');
  const where = 'Each value is on the card in the Postern window and, whole, in `postern config pending`.';
  if (listed.length <= detailCharsMax) return [...lines, listed === '' ? 'No entry differs.' : listed, where];
  const rest = (listed.length - detailCharsMax).toLocaleString('en-US');
  return [...lines, `${listed.slice(0, detailCharsMax)}… [cut: ${rest} more characters of this list not shown]`, where];
}
