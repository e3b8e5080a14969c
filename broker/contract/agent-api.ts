import { z } from 'zod';
import { errorCodeSchema } from './classification.js';
import type { ErrorCode } from './error-codes.js';
import { envelopeSchema } from './envelope.js';
import { ApprovalMode } from './route-modes.js';

/**
 * The agent-facing tools, typed once: the MCP server lists them (JSON Schema from these), checks
 * nothing beyond shape (the broker's executors validate and journal every action call, so an
 * invalid http_request still gets a ticket and a recorded refusal), and the typed SDK derives its
 * method types from them. Agents name routes and host entries, never hosts, ports or credentials.
 */
export const agentToolNames = [
  'http_request',
  'ssh_exec',
  'action_status',
  'fetch_result',
  'cancel_action',
  'list_routes',
  'request_credential',
] as const;
export type AgentToolName = (typeof agentToolNames)[number];

/**
 * How long a call waits for its outcome by default, and at most. The default answers before the MCP TypeScript
 * SDK's default request timeout (60 s), which many clients keep: a client that gives up first sends
 * notifications/cancelled, and a cancel before dispatch cancels the action. 45 s leaves 15 s for the answer to
 * travel and for slow hosts; a broker may lower it (postern.yaml `agents.wait_ms_default`). After it the call
 * answers timed_out and the action keeps its place; the agent waits on in chunks with action_status `wait_ms`.
 */
export const callWaitMsDefault = 45_000;
export const callWaitMsMax = 10 * 60_000;

export { actionRecordedCapability, actionRecordedNotification } from './agent-notifications.js';

const waitMs = z
  .number()
  .int()
  .positive()
  .max(callWaitMsMax)
  .describe(
    "How long this call waits for the outcome, in ms (the caller's wait only: it never cuts the remote operation, whose deadline the route or host sets). Keep it below your MCP client's own request timeout (60000 ms by default in the MCP SDK): a client that gives up first cancels the call, and before dispatch that cancels the action (CALLER_CANCELLED). After the wait the call answers and the action keeps its place; to wait longer, call action_status with wait_ms (each below the client's timeout) until it settles.",
  );
const actionId = z.string().min(1).max(80).describe('The invocation id (action_id) an earlier call returned.');

/** The bidirectional marks, embeddings, overrides and isolates (ALM, LRM, RLM, LRE…RLO, LRI…PDI). */
const bidiFormatting: ReadonlySet<number> = new Set([
  0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
]);
/**
 * True when `text` holds a control (C0, DEL, C1) or bidi formatting character. Text a person reads on a credential
 * request card must look the way it is stored, so these are refused rather than silently dropped (the agent learns
 * which field to fix). `lines` lets line feed and tab pass in a longer text.
 */
export function hasControlOrBidi(text: string, options: { lines?: boolean } = {}): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (options.lines === true && (code === 0x0a || code === 0x09)) continue;
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || bidiFormatting.has(code)) return true;
  }
  return false;
}
const displayRefusal = 'control and bidirectional-formatting characters are refused (they change what a person reads)';
function displayText(charsMax: number, options: { lines?: boolean } = {}) {
  return z
    .string()
    .max(charsMax)
    .refine((text) => !hasControlOrBidi(text, options), displayRefusal);
}
/** A host or a `*.` wildcard over its subdomains, with an optional port (what a vault binding names). */
const hostPattern =
  /^(\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*(?::[0-9]{1,5})?$/;
/** https only, visible ASCII only (a non-ASCII URL must be percent-encoded: no look-alike hosts on the card). */
const httpsUrl = /^https:\/\/[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?(?:[/?#][\x21-\x7e]*)?$/;
/** RFC 9110 token: a header name. */
const headerToken = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

/** request_credential's arguments (docs/agent.md): what the agent wants and for what; never a value. */
export const credentialRequestInputSchema = z
  .strictObject({
    purpose: displayText(500, { lines: true })
      .min(1)
      .optional()
      .describe(
        'Why the credential is needed, for the person who provisions it (required unless request_id is given).',
      ),
    for: z
      .union([
        z.strictObject({
          route: z.string().min(1).max(64).describe('A route name (list_routes) or one to be configured.'),
        }),
        z.strictObject({
          host: z
            .string()
            .max(260)
            .regex(hostPattern, 'a host name, or *. and a domain, with an optional :port')
            .describe('A host (api.example.com) or host pattern (*.example.com).'),
        }),
      ])
      .optional()
      .describe('Where the credential will be used (required unless request_id is given).'),
    kind: z.enum(['bearer', 'header', 'basic', 'query', 'ssh_key', 'aws_sigv4', 'oauth2_client']).optional(),
    header: z.string().regex(headerToken, 'an HTTP header name (RFC 9110 token), at most 64 characters').optional(),
    format: displayText(200).optional().describe('What the value looks like (e.g. "starts with ghp_").'),
    docs_url: z
      .string()
      .max(2048)
      .regex(httpsUrl, 'an https:// URL in visible ASCII')
      .optional()
      .describe('Where a person can create the credential; shown as text until the person chooses to open it.'),
    scopes: z.array(displayText(100).min(1)).max(20).optional(),
    timeout_ms: waitMs.optional(),
    request_id: z
      .string()
      .regex(/^crq_[0-9A-Za-z_-]{6,60}$/, 'a request_id an earlier request_credential answered')
      .optional()
      .describe(
        'Wait again on an earlier request of this session (its answer was pending); the other fields are ignored.',
      ),
  })
  .superRefine((input, ctx) => {
    if (input.request_id !== undefined) return;
    if (input.purpose === undefined)
      ctx.addIssue({ code: 'custom', path: ['purpose'], message: 'purpose is required' });
    else if (input.for === undefined) ctx.addIssue({ code: 'custom', path: ['for'], message: 'for is required' });
  });
export type CredentialRequestInput = z.infer<typeof credentialRequestInputSchema>;

/**
 * list_routes' page: at most this many entries (routes, then SSH host entries, in config order), and at most
 * listRoutesRulesMax rules and command rules over them, so no config makes one unbounded answer. An entry is never
 * split (the config allows at most 256 rules an entry), and a page holds at least one entry when any is left.
 */
export const listRoutesEntriesMax = 100;
export const listRoutesRulesMax = 512;
/** The config's bounds (1024 routes, 1024 SSH host entries): an offset past them names no entry. */
const listRoutesOffsetMax = 2048;

export const agentToolInputSchemas = {
  http_request: z.strictObject({
    route: z.string().min(1).max(64).describe('A configured route name (list_routes).'),
    method: z.string().min(1).max(16),
    path: z.string().min(1).max(65_536).describe("Path under the route's base path."),
    query: z
      .record(z.string().max(1024), z.union([z.string().max(65_536), z.array(z.string().max(65_536)).max(256)]))
      .optional(),
    headers: z
      .record(z.string().max(256), z.string().max(65_536))
      .optional()
      .describe('Never Authorization, Host, Cookie or the injected header.'),
    body: z.string().optional().describe('Sent as UTF-8.'),
    idempotency_key: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .describe('Only on routes that declare an idempotency contract.'),
    timeout_ms: waitMs.optional(),
    retry_of: actionId
      .optional()
      .describe(
        'Retry that earlier action: send exactly the same request (and idempotency key) again as its next attempt. Allowed only where the route declares a retry policy and the record says a resend is safe.',
      ),
  }),
  ssh_exec: z.strictObject({
    host: z.string().min(1).max(64).describe('A configured SSH host entry name (list_routes).'),
    command: z.string().min(1).max(65_536),
    timeout_ms: waitMs.optional(),
  }),
  action_status: z.strictObject({
    action_id: actionId,
    wait_ms: z
      .number()
      .int()
      .nonnegative()
      .max(callWaitMsMax)
      .optional()
      .describe(
        "Long-poll: wait up to this long for the action to settle (its outcome recorded) before answering; absent or 0 answers now. Keep it below your client's request timeout.",
      ),
  }),
  fetch_result: z.strictObject({ action_id: actionId }),
  cancel_action: z.strictObject({ action_id: actionId }),
  list_routes: z.strictObject({
    offset: z
      .number()
      .int()
      .nonnegative()
      .max(listRoutesOffsetMax)
      .optional()
      .describe(
        "Entries to skip (routes first, then SSH host entries, in config order): the next_offset of the previous answer's `more`. Absent or 0: from the first.",
      ),
  }),
  request_credential: credentialRequestInputSchema,
} as const satisfies { [K in AgentToolName]: z.ZodType };
export type AgentToolInput<K extends AgentToolName> = z.infer<(typeof agentToolInputSchemas)[K]>;

/** One-line descriptions the MCP tool list carries. */
export const agentToolDescriptions: Readonly<Record<AgentToolName, string>> = {
  http_request:
    'Ask Postern to send an HTTP request on a configured route. Postern injects the credential; a person may need to approve. Answers with the outcome envelope.',
  ssh_exec:
    'Ask Postern to run a command on a configured SSH host entry with a vault key. A person may need to approve. Answers with the outcome envelope.',
  action_status:
    'What is known about an earlier action (its envelope and queue position); with wait_ms it first waits (bounded) for the action to settle.',
  fetch_result:
    'Read the stored result of an earlier action again. A read: it never sends anything. Before an outcome is recorded it answers RESULT_NOT_READY (retry fetch_result): wait with action_status wait_ms first.',
  cancel_action:
    'Cancel an earlier action. Before dispatch nothing is sent; after dispatch the effect stays as recorded. An action already closed is not changed (ACTION_CLOSED).',
  list_routes:
    'The routes and SSH host entries this broker offers (names, methods, approval modes; never credentials), a page at a time: when `more` is present, call again with offset = more.next_offset for the rest.',
  request_credential:
    'Ask a person to provision a credential you lack (for a route or host). The person pastes it into the vault; you get the credential name, never the value. Answers provisioned, declined, expired, or pending (call again with request_id).',
};

/** Where an action waits in its lane (present while it has not been dispatched or closed). */
export const queuePositionSchema = z.object({
  ticket: z.number().int().positive(),
  lane: z.string().nullable(),
  /** What the call is waiting for now. */
  waiting: z.enum(['session_approval', 'approval', 'lane', 'lane_blocked', 'dispatching', 'none']),
  /** The ticket it waits behind ("approved, waiting for #42"), or the unknown head that blocks the lane. */
  waiting_for_ticket: z.number().int().positive().nullable(),
  /** A short human line, e.g. "approved, waiting for #42". */
  text: z.string().max(200),
});
export type QueuePosition = z.infer<typeof queuePositionSchema>;

/** An HTTP response as the agent receives it (scrubbed of echoed secrets, capped, flagged). */
export const agentHttpResponseSchema = z.object({
  status: z.number().int(),
  headers: z.record(z.string(), z.string()),
  /** UTF-8 text when the bytes are valid UTF-8, else base64 (body_encoding says which). */
  body: z.string(),
  body_encoding: z.enum(['utf8', 'base64']),
  truncated: z.boolean(),
  total_bytes: z.number().int().nonnegative(),
  redacted: z.boolean(),
  /**
   * Why the body is empty although the remote sent one: the broker could not read its plain bytes to scrub them
   * (a coding it does not decode, a compressed body too large or cut short, corrupt compression).
   */
  body_withheld: z
    .enum([
      'unsupported_content_encoding',
      'compressed_body_truncated',
      'decoded_body_too_large',
      'corrupt_compressed_body',
    ])
    .optional(),
  /** Content codings the broker undid: the remote compressed although the broker asked for identity. */
  content_decoded: z.array(z.string().max(32)).max(2).optional(),
});

export type AgentHttpResponse = z.infer<typeof agentHttpResponseSchema>;

/** An SSH command's output as the agent receives it (scrubbed of the key's parts, capped, flagged). */
export const agentSshOutputSchema = z.object({
  exit_status: z.number().int().optional(),
  exit_signal: z.string().optional(),
  /** UTF-8 text when the kept bytes are valid UTF-8, else base64 (stdout_encoding says which): never lossy. */
  stdout: z.string(),
  stdout_encoding: z.enum(['utf8', 'base64']),
  stderr: z.string(),
  stderr_encoding: z.enum(['utf8', 'base64']),
  stdout_bytes: z.number().int().nonnegative(),
  stderr_bytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
  output_complete: z.boolean(),
  /** The scrubber replaced something in stdout or stderr (the kept bytes are not all the remote's). */
  redacted: z.boolean(),
});
export type AgentSshOutput = z.infer<typeof agentSshOutputSchema>;

/**
 * An upstream MCP tool's reply as the agent receives it: the upstream's content blocks and structured content,
 * scrubbed of every secret given to that server, capped at the server's reply bound (`truncated` then says some
 * blocks were cut); `digest` is over the delivered JSON.
 */
export const agentMcpResultSchema = z.object({
  server: z.string(),
  tool: z.string(),
  is_error: z.boolean(),
  content: z.array(z.record(z.string(), z.unknown())),
  structured_content: z.record(z.string(), z.unknown()).optional(),
  bytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
});
export type AgentMcpResult = z.infer<typeof agentMcpResultSchema>;

/**
 * A refusal that belongs to no action (unknown tool, malformed arguments to a read tool, limits):
 * the same error shape as the envelope's, with no invocation.
 */
export const agentRefusalSchema = z.object({
  invocation_id: z.null(),
  error: z.object({
    code: errorCodeSchema,
    phase: z.literal('validation'),
    /**
     * not_attempted for a refused action call (nothing was admitted). Absent when a read was refused (action_status,
     * fetch_result, cancel_action, list_routes): a refusal to read says nothing about any action's outcome; absent
     * too for INTERNAL once the backend had the call (its action may have been admitted).
     */
    outcome: z.literal('not_attempted').optional(),
    retry: z.enum(['after_correction', 'backoff', 'never', 'fetch_result']),
    message: z.string().max(1000),
    field: z.string().optional(),
  }),
});
export type AgentRefusal = z.infer<typeof agentRefusalSchema>;

/**
 * The tools that read what exists and admit no action. A refusal of one carries no outcome: it says nothing about
 * any action, only that this read was refused (docs/agent.md, "Refusals to read").
 */
export const agentReadToolNames = [
  'action_status',
  'fetch_result',
  'cancel_action',
  'list_routes',
] as const satisfies readonly AgentToolName[];

export function isAgentReadTool(name: string): boolean {
  return (agentReadToolNames as readonly string[]).includes(name);
}

/**
 * A refusal that belongs to no action, stopped at validation (the socket's and the tools' own): `not_attempted` for a
 * call refused before it admitted anything; `outcome` null where no outcome may be claimed (a refused read, or a
 * call that reached the backend and may have admitted its action).
 */
export function agentRefusal(
  code: ErrorCode,
  message: string,
  retry: AgentRefusal['error']['retry'],
  field?: string,
  outcome: 'not_attempted' | null = 'not_attempted',
): AgentRefusal {
  return {
    invocation_id: null,
    error: {
      code,
      phase: 'validation',
      ...(outcome === null ? {} : { outcome }),
      retry,
      message,
      ...(field === undefined ? {} : { field }),
    },
  };
}

/**
 * The decision on an action's ticket as the journal records it: who decided (a person, a policy, the broker's
 * expiry), when, and a person's reason. `expires_at_ms` is the card's expiry while it waits for a person.
 * `closed`: the card was closed while it waited and nobody decided (the broker restarted under it: its recovery
 * recorded the action's outcome); `by`, `reason` and `decided_at_ms` are then null, and `closed_code` /
 * `closed_at_ms` say why and when (the outcome's code and when it was recorded).
 */
export const agentDecisionSchema = z.object({
  state: z.enum(['waiting', 'approved', 'rejected', 'expired', 'cancelled', 'closed']),
  by: z
    .object({
      kind: z.enum(['person', 'policy', 'agent', 'broker', 'process']),
      id: z.string().max(200),
      surface: z.string().max(32).optional(),
    })
    .nullable(),
  reason: z.string().max(2000).nullable(),
  decided_at_ms: z.number().int().nonnegative().nullable(),
  expires_at_ms: z.number().int().nonnegative().nullable(),
  /** state closed: the code of the outcome that closed the undecided card (BROKER_RESTARTED…). */
  closed_code: errorCodeSchema.optional(),
  /** state closed: when that outcome was recorded. */
  closed_at_ms: z.number().int().nonnegative().optional(),
  /**
   * The decision's events are sealed (an earlier run's read before a person unlocks the vault, or a run that never had
   * a key): `state` and `decided_at_ms` come from the plaintext current-state table, a closed card's `closed_at_ms` from
   * its closing outcome's plaintext event header and its `closed_code` from the table while no later classification
   * replaced it (else left out: that code is sealed too); `by`, `reason` and `expires_at_ms` are null because only the
   * sealed events hold them. While the vault is locked, an earlier run's events open after the unlock (read again then);
   * a run that never had a key stays sealed: no unlock opens it.
   */
  sealed: z.literal(true).optional(),
});
export type AgentDecision = z.infer<typeof agentDecisionSchema>;

/** Every tool answer's structuredContent: an action's envelope (plus what it carries), or a refusal. */
export const agentToolReplySchema = z.union([
  envelopeSchema.extend({
    ticket: z.number().int().positive().nullable().optional(),
    lane: z.string().nullable().optional(),
    queue: queuePositionSchema.optional(),
    decision: agentDecisionSchema.optional(),
    response: agentHttpResponseSchema.optional(),
    output: agentSshOutputSchema.optional(),
    mcp_result: agentMcpResultSchema.optional(),
  }),
  agentRefusalSchema,
]);
export type AgentToolReply = z.infer<typeof agentToolReplySchema>;

/**
 * request_credential's answer: the request's state and, once provisioned, the credential's name — never its value.
 * `pending`: the caller's wait ended first; call again with `request_id` (until `expires_at_ms`).
 */
export const credentialRequestReplySchema = z.object({
  status: z.enum(['provisioned', 'declined', 'expired', 'pending']),
  request_id: z.string(),
  /** provisioned: the vault credential's name (configure or use it by this name). */
  credential: z.string().max(64).optional(),
  /** declined: the person's reason, as they wrote it. */
  reason: z.string().max(2000).optional(),
  /** pending: when the request expires unanswered. */
  expires_at_ms: z.number().int().nonnegative().optional(),
});
export type CredentialRequestReply = z.infer<typeof credentialRequestReplySchema>;

/**
 * list_routes' answer. Each route's and SSH host's `approval` is that of a call no rule matches; `rules` (a route's
 * method + path rules) and `commands` (a host's command rules) are the configured rules in the order they are tried
 * (first match wins), each with the approval a call it matches gets: `none` runs without a card. A command rule's
 * `wildcard` says what its `*` may match (docs/ssh-channel.md, "Command rules"): `strict`, one word of letters,
 * digits and `_ - . / : , @ + =` that never begins a word with `-`, `+` (an option) or `=` (zsh's command path), never
 * supplies the `=` of a `NAME=value` word before the command word (an environment variable of the command) nor takes
 * a `..` path segment; `loose` (rules_may_loosen: true on the rule), those and `..` too. Never a host, address, user,
 * key or credential. One page (listRoutesEntriesMax, listRoutesRulesMax): `more` says how many entries are not shown
 * and the offset that lists them.
 */
export const agentRouteListSchema = z.object({
  /** This page's first entry (routes first, then SSH host entries, in config order), when the call gave an offset > 0. */
  offset: z.number().int().positive().optional(),
  /**
   * sha256 of the whole listing (every page) this page was cut from: the same on every page of one config, another
   * once a reload changed what list_routes lists, so pages from two configs are never read as one list. Sent by every
   * broker since it paged; optional for one that did not.
   */
  list_digest: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/)
    .optional(),
  routes: z.array(
    z.object({
      name: z.string(),
      methods: z.array(z.string()),
      approval: z.enum(ApprovalMode),
      idempotency_contract: z.boolean(),
      base_path: z.string(),
      rules: z.array(z.object({ methods: z.array(z.string()), path: z.string(), approval: z.enum(ApprovalMode) })),
    }),
  ),
  ssh_hosts: z.array(
    z.object({
      name: z.string(),
      approval: z.enum(ApprovalMode),
      commands: z.array(
        z.object({ command: z.string(), approval: z.enum(ApprovalMode), wildcard: z.enum(['strict', 'loose']) }),
      ),
    }),
  ),
  /** Present when entries follow this page: how many, and the offset that lists them (list_routes' page bounds). */
  more: z.object({ not_shown: z.number().int().positive(), next_offset: z.number().int().positive() }).optional(),
});
export type AgentRouteList = z.infer<typeof agentRouteListSchema>;

/** The connecting process as the kernel describes it (never as the client claims). */
export const agentPeerSchema = z.object({
  pid: z.number().int().positive(),
  uid: z.number().int().nonnegative(),
  gid: z.number().int().nonnegative(),
  start_time: z.string(),
  ppid: z.number().int().nonnegative().nullable(),
  exe: z.string().nullable(),
  cwd: z.string().nullable(),
  parent_exe: z.string().nullable(),
});
export type AgentPeer = z.infer<typeof agentPeerSchema>;
