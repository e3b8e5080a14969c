import type {
  AgentRefusal,
  AgentRouteList,
  AgentToolReply,
  CredentialRequestReply,
  EnvelopeError,
} from '../contract/index.js';
import type { TargetNames, ToolAnswer } from '../ports/index.js';

/** The line that introduces the JSON; the JSON starts on the next line and runs to the end of the text. */
export const answerJsonMarker =
  'structuredContent as JSON (the same data; it starts on the next line and runs to the end):';
/** The readable lines above the JSON are summaries; each is cut here (the JSON below is whole). */
const summaryCharsMax = 600;
/** The contract's bound on an error message (envelope.ts, agent-api.ts). */
const errorMessageCharsMax = 1000;

type Reply = AgentToolReply | AgentRouteList | CredentialRequestReply;
type EnvelopeReply = Extract<AgentToolReply, { evidence: unknown }>;

/**
 * The text block of a tool answer, for clients that read only text (MCP asks a tool that returns
 * structured content to return it serialized in a text block too): the backend's one-line headline,
 * a few readable lines (action, error with its field, response status / truncation / withheld body,
 * SSH exit and output sizes, queue position, route names), then `structured` itself as JSON. Built
 * only from the headline and `structured` — the scrubbed reply the answer sends anyway — so the text
 * can never carry more than structuredContent does.
 */
export function answerText(headline: string, structured: Reply): string {
  const first = oneLine(headline) || 'postern answer';
  const lines = [first, ...summaryLines(structured)].map(oneLine);
  return `${lines.join('\n')}\n${answerJsonMarker}\n${JSON.stringify(structured, null, 2)}`;
}

function summaryLines(structured: Reply): string[] {
  if ('routes' in structured) return routeLines(structured);
  if ('request_id' in structured) return [credentialRequestLine(structured)];
  if (structured.invocation_id === null) return [errorLine(structured.error)];
  const reply = structured as EnvelopeReply;
  const lines = [actionLine(reply)];
  if (reply.error !== undefined) lines.push(errorLine(reply.error));
  if (reply.queue !== undefined)
    lines.push(
      `waiting: ${reply.queue.waiting}${reply.queue.waiting_for_ticket === null ? '' : ` (#${reply.queue.waiting_for_ticket})`}: ${reply.queue.text}`,
    );
  if (reply.response !== undefined) lines.push(responseLine(reply.response));
  if (reply.output !== undefined) lines.push(outputLine(reply.output));
  return lines;
}

/** request_credential: where the request stands and the credential's name once provisioned (never a value). */
function credentialRequestLine(r: CredentialRequestReply): string {
  const parts = [`credential request: ${r.request_id}`, `status: ${r.status}`];
  if (r.credential !== undefined) parts.push(`credential: ${r.credential}`);
  if (r.reason !== undefined) parts.push(`reason: ${r.reason}`);
  if (r.expires_at_ms !== undefined) parts.push(`expires: ${new Date(r.expires_at_ms).toISOString()}`);
  return parts.join(' · ');
}

function actionLine(r: EnvelopeReply): string {
  const where = [
    r.ticket === undefined || r.ticket === null ? undefined : `ticket #${r.ticket}`,
    r.lane === undefined || r.lane === null ? undefined : `lane ${r.lane}`,
  ];
  return [
    `action: ${r.invocation_id}`,
    ...where,
    `caller: ${r.caller_disposition ?? 'not recorded'}`,
    `effect: ${r.effect ?? 'none recorded'}`,
  ]
    .filter((part) => part !== undefined)
    .join(' · ');
}

/** A part the error does not carry is left out, never printed as "undefined" (a refused read names no outcome). */
function errorLine(e: EnvelopeError | AgentRefusal['error']): string {
  const field = e.field === undefined || e.field === '' ? '' : ` (field: ${e.field})`;
  const after = 'retry_after_ms' in e && e.retry_after_ms !== undefined ? ` after ${e.retry_after_ms} ms` : '';
  const parts = [
    `error: ${e.code}${field}: ${e.message}`,
    `retry: ${e.retry}${after}`,
    `phase: ${e.phase}`,
    e.outcome === undefined ? undefined : `outcome: ${e.outcome}`,
  ];
  return parts.filter((part) => part !== undefined).join(' · ');
}

function responseLine(r: NonNullable<EnvelopeReply['response']>): string {
  const kept = Buffer.byteLength(r.body, r.body_encoding === 'base64' ? 'base64' : 'utf8');
  let body: string;
  if (r.body_withheld !== undefined)
    body = `body WITHHELD (${r.body_withheld}): the remote sent ${r.total_bytes} bytes, none shown`;
  else if (r.truncated)
    body = `body TRUNCATED: ${kept} of ${r.total_bytes} bytes kept (${r.body_encoding}); the rest was not stored`;
  else body = `body complete: ${r.total_bytes} bytes (${r.body_encoding})`;
  const notes = [
    r.redacted ? 'secrets redacted' : undefined,
    r.content_decoded === undefined ? undefined : `decoded from ${r.content_decoded.join(', ')}`,
  ];
  return [`response: HTTP ${r.status}`, body, `${Object.keys(r.headers).length} headers`, ...notes]
    .filter((part) => part !== undefined)
    .join(' · ');
}

function outputLine(o: NonNullable<EnvelopeReply['output']>): string {
  const end =
    o.exit_status !== undefined
      ? `exit ${o.exit_status}`
      : o.exit_signal !== undefined
        ? `signal ${o.exit_signal}`
        : 'no exit status';
  const complete = o.truncated
    ? 'output TRUNCATED (the rest was not stored)'
    : o.output_complete
      ? 'output complete'
      : 'output INCOMPLETE';
  const redacted = o.redacted ? ' · secrets redacted' : '';
  return (
    `output: ${end} · stdout ${o.stdout_bytes} bytes (${o.stdout_encoding}) · ` +
    `stderr ${o.stderr_bytes} bytes (${o.stderr_encoding}) · ${complete}${redacted}`
  );
}

/**
 * `routes:` and `ssh hosts:` with each entry's approval, then one line per route or host that has rules: the rules in
 * the order they are tried, each with its approval (a command as JSON text, so a `;` or `,` in it reads as its own).
 * A page after the first says where it starts; one with entries after it ends with how many are not shown and the
 * offset that lists them.
 */
function routeLines(list: AgentRouteList): string[] {
  const routes = list.routes.map((r) => `${r.name} (${r.methods.join(', ')}; approval ${r.approval})`);
  const hosts = list.ssh_hosts.map((h) => `${h.name} (approval ${h.approval})`);
  const { more } = list;
  return [
    ...(list.offset === undefined
      ? []
      : [`from entry ${list.offset} (routes first, then SSH host entries; offset 0 is the first page)`]),
    `routes: ${routes.length === 0 ? 'none' : routes.join('; ')}`,
    `ssh hosts: ${hosts.length === 0 ? 'none' : hosts.join('; ')}`,
    ...list.routes
      .filter((r) => r.rules.length > 0)
      .map(
        (r) =>
          `route ${r.name} rules, first match wins, else approval ${r.approval}: ${r.rules.map((rule) => `${rule.methods.join(' ')} ${rule.path} → ${rule.approval}`).join('; ')}`,
      ),
    ...list.ssh_hosts
      .filter((h) => h.commands.length > 0)
      .map(
        (h) =>
          `ssh host ${h.name} commands, first match wins, else approval ${h.approval}: ${h.commands.map((c) => `${JSON.stringify(c.command)} → ${c.approval}${c.wildcard === 'loose' ? ' (loose *)' : ''}`).join('; ')}`,
      ),
    ...(more === undefined
      ? []
      : [
          `… ${more.not_shown} more routes and SSH host entries not shown: call list_routes with offset ${more.next_offset}`,
        ]),
  ];
}

/** Newlines inside a summary would let a message pose as another line (or as the JSON marker). */
function oneLine(text: string): string {
  const flat = text.replace(/[\r\n\u2028\u2029]+/g, ' ').trim();
  return flat.length <= summaryCharsMax ? flat : `${flat.slice(0, summaryCharsMax - 1)}…`;
}

/** Ends a names list the message bound cut short. */
const namesCut = '… (list_routes has them all)';

/**
 * An answer refusing an unknown route or SSH host entry, with the configured names added to its error
 * message, so the agent can correct the call without another round trip. Names only: they are what
 * list_routes gives any session (`targetNames` has them all, straight from the config), never a host, base URL or
 * credential. As many whole names as the message bound (errorMessageCharsMax) holds, then `… (list_routes has them
 * all)`. Any other answer, or names that cannot be had, leaves the answer as it was.
 */
export function withTargetNames(answer: ToolAnswer, targetNames: () => TargetNames | undefined): ToolAnswer {
  const structured = answer.structured;
  if ('routes' in structured || 'request_id' in structured || structured.error?.code !== 'INVALID_TARGET')
    return answer;
  const { error } = structured;
  const kind = error.field === 'route' ? 'routes' : error.field === 'host' ? 'ssh_hosts' : undefined;
  if (kind === undefined) return answer;
  let names: readonly string[];
  try {
    const all = targetNames();
    if (all === undefined) return answer;
    names = all[kind];
  } catch {
    return answer;
  }
  const label = kind === 'routes' ? 'configured routes' : 'configured SSH host entries';
  const head = `${error.message}; ${label}: `;
  // The refusal's own text is never cut to make room for names: without room for one name or the marker, none.
  if (head.length + namesCut.length > errorMessageCharsMax) return answer;
  const listed: string[] = [];
  let length = head.length;
  for (const [i, name] of names.entries()) {
    const separator = i === 0 ? 0 : ', '.length;
    // Room for this name, and for the marker after it unless it is the last.
    const after = i === names.length - 1 ? 0 : `, ${namesCut}`.length;
    if (length + separator + name.length + after > errorMessageCharsMax) {
      listed.push(namesCut);
      break;
    }
    listed.push(name);
    length += separator + name.length;
  }
  const message = `${head}${listed.length === 0 ? 'none' : listed.join(', ')}`;
  return { ...answer, structured: { ...structured, error: { ...error, message } } as AgentToolReply };
}
