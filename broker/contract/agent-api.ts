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

const waitMs = z
  .number()
  .int()
  .positive()
  .max(callWaitMsMax)
  .describe(
    "How long this call waits for the outcome (the caller's wait only: it never cuts the remote operation, whose deadline the route or host sets). After it the action keeps its place; poll with action_status.",
  );
const actionId = z.string().min(1).max(80).describe('The invocation id (action_id) an earlier call returned.');

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
  list_routes: z.strictObject({}),
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
  fetch_result: 'Read the stored result of an earlier action again. A read: it never sends anything.',
  cancel_action:
    'Cancel an earlier action. Before dispatch nothing is sent; after dispatch the effect stays as recorded.',
  list_routes:
    'The routes and SSH host entries this broker offers (names, methods, approval modes; never credentials).',
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

export const agentSshOutputSchema = z.object({
  exit_status: z.number().int().optional(),
  exit_signal: z.string().optional(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_bytes: z.number().int().nonnegative(),
  stderr_bytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
  output_complete: z.boolean(),
});

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
     * fetch_result, cancel_action, list_routes): a refusal to read says nothing about any action's outcome.
     */
    outcome: z.literal('not_attempted').optional(),
    retry: z.enum(['after_correction', 'backoff', 'never', 'fetch_result']),
    message: z.string().max(1000),
    field: z.string().optional(),
  }),
});
export type AgentRefusal = z.infer<typeof agentRefusalSchema>;

/** A refusal that belongs to no action: not attempted, stopped at validation (the socket's and the tools' own). */
export function agentRefusal(
  code: ErrorCode,
  message: string,
  retry: AgentRefusal['error']['retry'],
  field?: string,
): AgentRefusal {
  return {
    invocation_id: null,
    error: {
      code,
      phase: 'validation',
      outcome: 'not_attempted',
      retry,
      message,
      ...(field === undefined ? {} : { field }),
    },
  };
}

/**
 * The decision on an action's ticket as the journal records it: who decided (a person, a policy, the broker's
 * expiry), when, and a person's reason. `expires_at_ms` is the card's expiry while it waits for a person.
 */
export const agentDecisionSchema = z.object({
  state: z.enum(['waiting', 'approved', 'rejected', 'expired', 'cancelled']),
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
  }),
  agentRefusalSchema,
]);
export type AgentToolReply = z.infer<typeof agentToolReplySchema>;

/** list_routes' answer. */
export const agentRouteListSchema = z.object({
  routes: z.array(
    z.object({
      name: z.string(),
      methods: z.array(z.string()),
      approval: z.enum(ApprovalMode),
      idempotency_contract: z.boolean(),
      base_path: z.string(),
    }),
  ),
  ssh_hosts: z.array(z.object({ name: z.string(), approval: z.enum(ApprovalMode) })),
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
