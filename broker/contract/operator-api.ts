import { z } from 'zod';
import { actionListSchemas, actionWaitSchema, notBlank } from './action-list-api.js';
import { actionStateSchema, sessionStateSchema } from './action-record.js';
import { SessionRecordCheck } from './session-record.js';
import { queuePositionSchema } from './agent-api.js';
import { ApprovalMode } from './route-modes.js';
import type { ClosedSet } from './closed-set.js';
import { Actor, cardPairSchema, EventKind } from './events.js';
import { Effect, EvidenceSource, Outcome, Phase } from './outcome.js';
import type { BrokerApiMethod } from './operator-methods.js';
import { vaultApiSchemas } from './operator-vault-api.js';
import { credentialRequestApiSchemas } from './operator-credential-requests-api.js';
import { allowlistApiSchemas } from './operator-allowlist-api.js';
import { integrityApiSchemas } from './operator-integrity-api.js';
import { isTimeZone } from './time-words.js';
import { attestBasisCharsMax, decisionReasonCharsMax } from './operator-limits.js';

/** Why the vault locked: a person asked, the idle time passed, the broker stopped (anything else: `other`). */
export const vaultLockReasons = ['operator', 'idle', 'shutdown', 'other'] as const;
export type VaultLockReason = (typeof vaultLockReasons)[number];

/** The broker's health as the operator API reports it. */
export const brokerStatusSchema = z.object({
  version: z.string(),
  mode: z.enum(['desktop', 'headless']),
  started_at_ms: z.number().int(),
  data_dir: z.string(),
  journal: z.object({
    /** `closing`: the broker is stopping; new appends are refused, what was accepted still commits. */
    state: z.enum(['open', 'closing', 'failed', 'closed']),
    events: z.number().int().nonnegative(),
    last_seq: z.number().int().nonnegative(),
    schema_version: z.number().int().nonnegative(),
    recovered_at_open: z.number().int().nonnegative(),
    /**
     * The journal's writer thread (docs/journal-writer-thread.md): `inline` (commits on the event loop: none running),
     * `starting`, `running`, or `failed_to_start` with what it met (a code, a line without file paths, when); the
     * journal then commits inline for the rest of the run. Absent from a journal read from its file, and from brokers
     * that predate it.
     */
    writer_thread: z
      .object({
        state: z.enum(['inline', 'starting', 'running', 'failed_to_start']),
        error: z.object({ code: z.string(), detail: z.string(), at_ms: z.number().int() }).optional(),
      })
      .optional(),
  }),
  actions: z.object({
    total: z.number().int().nonnegative(),
    in_flight: z.number().int().nonnegative(),
    unknown: z.number().int().nonnegative(),
  }),
  /** The credential vault's state (broker/vault); never anything secret. */
  vault: z.object({
    state: z.enum(['uninitialized', 'locked', 'unlocked']),
    /** postern.yaml `vault.auto_lock_minutes` in force; 0 = never. */
    auto_lock_minutes: z.number().int().nonnegative(),
    /** The last time this broker locked the vault, and why; null until the first lock. Never silent. */
    last_lock: z.object({ at_ms: z.number().int(), reason: z.enum(vaultLockReasons) }).nullable(),
  }),
  /**
   * Each configured upstream MCP server (mcp_servers): idle until first needed; a crashing child shows its restarts,
   * when it may be started again (backoff) and what went wrong last (a closed code and a detail that carries no
   * upstream output). Absent from brokers that predate upstream servers.
   */
  upstreams: z
    .array(
      z.object({
        server: z.string(),
        transport: z.enum(['stdio', 'streamable_http']),
        state: z.enum(['idle', 'starting', 'ready', 'backoff', 'failed']),
        pid: z.number().int().positive().optional(),
        restarts: z.number().int().nonnegative(),
        retry_at_ms: z.number().int().optional(),
        last_error: z.object({ code: z.string(), detail: z.string(), at_ms: z.number().int() }).optional(),
        /** OAuth servers: `required` until a person authorizes (mcp_servers.authorize); `none` for the others. */
        auth: z.enum(['none', 'ok', 'required']).optional(),
      }),
    )
    .optional(),
});
export type BrokerStatus = z.infer<typeof brokerStatusSchema>;

/**
 * Replies cross every process boundary in one shape (Signal's channels habit): a value, or a coded
 * error the other side can branch on.
 */
export type Reply<T> = { ok: true; value: T } | { ok: false; error: ReplyError };

/**
 * Why an OPERATOR_PROOF_REQUIRED refusal holds, for a client that must not read its message to decide (a CLI prompting
 * for a passphrase): `passphrase_from_file` — this broker's vault passphrase was read from a file, so no passphrase is a
 * person's proof here (control-proof.ts); asking the person for it would only be refused again. `no_vault` (the operator
 * UI only): no vault exists yet, so no passphrase can be asked for; creating the vault is the one decision taken.
 */
export type ProofRefusal = 'passphrase_from_file' | 'no_vault';

export interface ReplyError {
  code: string;
  message: string;
  field?: string;
  retry_after_ms?: number;
  /** On OPERATOR_PROOF_REQUIRED only: a refusal no passphrase can lift (see ProofRefusal). */
  proof_refusal?: ProofRefusal;
  /**
   * On AUDIT_KEY_UNAVAILABLE only: what was read was sealed by a broker run that ended before any audit key existed, so
   * no unlock opens it, locked or not. Absent, the same code means an earlier run's events, which open once a person
   * unlocks the vault.
   */
  sealed_for_good?: true;
}

/** What a person sees on one approval card (DESIGN §4). Built before injection; never a secret. */
export const approvalCardSchema = z.object({
  ticket: z.number().int().positive(),
  action_id: z.string(),
  lane: z.string().nullable(),
  channel: z.enum(['http', 'ssh', 'mcp']),
  approval: z.enum(ApprovalMode),
  /** The route rule that set `approval` (`rules[1]: POST /documents/** → per_call`); null: the route's own. */
  approval_rule: z.string().nullable().optional(),
  /** pending: needs a decision; approved_waiting: approved, behind an unresolved older ticket;
   *  awaiting_session: the agent process is not approved yet; blocked_head: outcome unknown (dispatched,
   *  or recorded unknown before dispatch by a quarantined journal's recovery), blocking its lane;
   *  dispatching: on its way or in flight. */
  state: z.enum(['pending', 'awaiting_session', 'approved_waiting', 'blocked_head', 'dispatching']),
  /** The ticket this one waits behind, or for a blocked head null. */
  waiting_for_ticket: z.number().int().positive().nullable(),
  /** One line for people, e.g. "approved, waiting for #42". */
  text: z.string(),
  session: z
    .object({
      session_id: z.string(),
      status: z.string(),
      pid: z.number().int(),
      exe: z.string().nullable(),
      cwd: z.string().nullable(),
      parent_exe: z.string().nullable(),
      client_name: z.string().nullable(),
      /** Whether `status` is the journal's own record or an earlier run's row not confirmed by its events (SessionRecordCheck). */
      record: z.enum(SessionRecordCheck),
    })
    .nullable(),
  /** route:<name> or host:<name>. */
  target: z.string(),
  method: z.string().nullable(),
  path: z.string().nullable(),
  /**
   * HTTP: the query pairs as the agent sent them (bounded; a pair cut says so in its third element, how many characters
   * of its name and value are hidden; a last pair "…" says how many more pairs). Empty for SSH.
   */
  query: z.array(cardPairSchema),
  /** HTTP: the headers the agent set, name and bounded value (cut as query pairs); never the credential header. */
  headers: z.array(cardPairSchema),
  /**
   * SSH: the whole command as the agent sent it (up to the 32 KiB the channel admits; a cut would say how much
   * it hides). MCP: the tool name (bounded).
   */
  command: z.string().nullable(),
  /**
   * HTTP: whether `query`, `headers` and `body_bytes` are the request as the agent sent it. `shown`: they are (held
   * in memory while its executor runs, else read back from ACTION_ACCEPTED's `request_view`, sealed in the journal).
   * `sealed`: the card was rebuilt from the journal and that event is an earlier run's while the vault is locked —
   * the empty query and headers prove nothing; unlock to see them. `sealed_for_good`: that event was sealed by a broker
   * run that ended before any audit key existed, so no unlock opens it, locked or not. `not_recorded`: a broker that did
   * not journal them admitted it. Absent: `shown` (SSH and MCP cards show what they have).
   */
  request_details: z.enum(['shown', 'sealed', 'sealed_for_good', 'not_recorded']).optional(),
  /** The first bytes of the body as the agent sent it, before any injection (bounded, UTF-8 or a note). */
  body_preview: z.string().nullable(),
  body_bytes: z.number().int().nonnegative(),
  /** The credential's name from configuration; never its value. */
  credential: z.string(),
  request_fingerprint: z.string(),
  accepted_at_ms: z.number().int(),
  /** When a pending decision expires (null once decided). */
  expires_at_ms: z.number().int().nullable(),
  /** A retry of an indeterminate action needs a fresh decision and is labelled so. */
  retry_of: z.string().nullable(),
  /**
   * Retries of this same action so far (its RETRY_LEASED generation) and the budget recorded at
   * admission: a card with retries > 0 is a retry of an indeterminate action and says so.
   */
  retries: z.object({ generation: z.number().int().nonnegative(), budget: z.number().int().nonnegative() }).optional(),
  /** A DISPATCH_STARTED is recorded for this action: the call was (or may have been) handed to the remote. */
  dispatch_recorded: z.boolean(),
  /**
   * A person's retry could be taken: the journal would lease one on this record (broker/core retriableRecord, the rule
   * RETRY_LEASED is folded by: a recorded unknown after dispatch or a backoff outcome, not abandoned) and there is a
   * request to resend (an HTTP action under a bound idempotency key: the request kept at admission). False for an
   * unknown a quarantined journal's recovery recorded before any dispatch, an SSH command, or an HTTP call without a
   * key: the desktop offers no retry then. True is no promise: the key's window, the budget and a live lease are
   * checked when a person asks.
   */
  retry_possible: z.boolean(),
  /**
   * When retry_possible: the end of the idempotency key's window (the key's earliest safe expiry recorded at
   * admission, exclusive — the journal leases a same-key retry only before it, so a click at or after it is refused
   * with NOT_FOUND and nothing is sent). Null when no retry is offered. The desktop shows it and, once its own clock
   * passes it, offers no Retry; the journal's check at click time stays the authority.
   */
  retry_until_ms: z.number().int().nullable(),
});
export type ApprovalCard = z.infer<typeof approvalCardSchema>;

export const sessionSummarySchema = sessionStateSchema.extend({
  calls: z.number().int().nonnegative(),
  pending: z.number().int().nonnegative(),
  connected: z.boolean(),
  /**
   * Whether the state shown is the journal's own record or an earlier run's row its sealed events have not confirmed
   * (SessionRecordCheck): an `approved_by` on a row not confirmed is what the file says, not a decision the journal
   * vouches for, and is not acted on.
   */
  record: z.enum(SessionRecordCheck),
});
export type SessionSummary = z.infer<typeof sessionSummarySchema>;

/** One Activity row: header facts of a journal event plus a short non-secret summary. */
export const activityEventSchema = z.object({
  seq: z.number().int().positive(),
  at_ms: z.number().int(),
  kind: z.enum(EventKind),
  action_id: z.string(),
  session_id: z.string().nullable(),
  ticket: z.number().int().nullable(),
  lane: z.string().nullable(),
  outcome: z.string().nullable(),
  code: z.string().nullable(),
  /** For people: terse, non-secret; a time in it is ISO UTC, as the terminal writes times (the console: shownSummary). */
  summary: z.string(),
  /**
   * A CARD_SHOWN's expiry as data (epoch ms), null for every other event: the console writes it in the viewer's
   * zone (time-words.ts), never the summary's ISO — the daemon's zone need not be the person's.
   */
  expires_at_ms: z.number().int().nullable(),
});
export type ActivityEvent = z.infer<typeof activityEventSchema>;

/**
 * What released a lane that this action blocked as its unknown head (broker/core/lane-release.ts):
 * a retry under the same action id whose attempt settled (by the lease's decision: an idempotent
 * repeat, a same-key retry, a retry after backoff), a reconciliation lookup, a person's
 * attestation, or a person's abandonment (the outcome stays unknown).
 */
export const LaneReleaseKind = {
  idempotent_repeat: 'idempotent_repeat',
  same_key_retry: 'same_key_retry',
  retry_after_backoff: 'retry_after_backoff',
  reconciliation: 'reconciliation',
  operator_attested: 'operator_attested',
  abandoned: 'abandoned',
} as const satisfies ClosedSet<string>;
export type LaneReleaseKind = keyof typeof LaneReleaseKind;

export const laneReleaseSchema = z.object({
  kind: z.enum(LaneReleaseKind),
  /** The event after which the lane moved on: the retry's settlement, RECONCILIATION_RESULT, OPERATOR_ATTESTED or ABANDONED. */
  seq: z.number().int().positive(),
  /** Who did it: the person who abandoned, attested or asked for the lookup; who asked for the retry. Absent when nobody was named. */
  actor: Actor.optional(),
  /** A retry: the RETRY_LEASED that licensed the attempt which settled. */
  lease_seq: z.number().int().positive().optional(),
  /** The outcome the release left (unknown after an abandonment). */
  outcome: z.enum(Outcome),
  /** The evidence source of the settling classification (remote_query for a reconciliation); absent for an abandonment. */
  source: z.enum(EvidenceSource).optional(),
  /** The abandonment's reason or the attestation's basis, as the person wrote it. */
  reason: z.string().max(4000).optional(),
});
export type LaneRelease = z.infer<typeof laneReleaseSchema>;

const ticketInput = z.strictObject({ ticket: z.number().int().positive() });
const reason = z.string().trim().min(1).max(decisionReasonCharsMax);
const decisionOutput = z.object({
  ticket: z.number().int().positive(),
  action_id: z.string(),
  decision: z.string(),
  journal_seq: z.number().int(),
});

/** Input and output schemas per operator method: the handlers parse input with them. */
export const brokerApiSchemas = {
  status: { input: z.strictObject({}), output: brokerStatusSchema },
  'approvals.list': { input: z.strictObject({}), output: z.object({ cards: z.array(approvalCardSchema) }) },
  'approvals.approve': { input: ticketInput, output: decisionOutput },
  'approvals.reject': { input: ticketInput.extend({ reason }), output: decisionOutput },
  'approvals.cancel': { input: ticketInput.extend({ reason: reason.optional() }), output: decisionOutput },
  'approvals.abandon': { input: ticketInput.extend({ reason }), output: decisionOutput },
  'actions.show': {
    input: z.strictObject({ action_id: z.string().min(1).max(80) }),
    output: z.object({
      /** The projected state; while open (isActionOpen: a dispatched action still running) outcome and effect are null. */
      state: actionStateSchema,
      queue: queuePositionSchema.nullable(),
      events: z.array(activityEventSchema),
      /** What released the lane this action blocked as an unknown head; null if it never did, or still does. */
      released_by: laneReleaseSchema.nullable(),
      /** Each earlier unresolved ticket of its lane it waited behind once allowed (actionWaitSchema); empty without a lane. */
      waited_for: z.array(actionWaitSchema),
    }),
  },
  'actions.list': actionListSchemas,
  'actions.attest': {
    input: z.strictObject({
      action_id: z.string().min(1).max(80),
      /** A person may attest committed or rejected — never not_attempted after dispatch. */
      outcome: z.enum(['committed', 'rejected']),
      effect: z.enum(Effect),
      basis: z.string().trim().min(1).max(attestBasisCharsMax),
    }),
    output: decisionOutput,
  },
  'actions.reconcile': {
    input: z.strictObject({ action_id: z.string().min(1).max(80) }),
    output: z.object({
      /** The unknown action that was reconciled. */
      action_id: z.string(),
      ticket: z.number().int().positive(),
      /** The lookup that asked the remote: its own recorded action (ACTION_ACCEPTED reconciles). */
      lookup_action_id: z.string(),
      correlation: z.enum(['idempotency_token', 'operation_id', 'provider_request_id', 'bounded_read_back']),
      /** A bounded read-back: why it is enough or why ambiguity remains. */
      note: z.string().optional(),
      read_back: z.object({ matched: z.number().int(), examined: z.number().int() }).optional(),
      /** The original's outcome after the RECONCILIATION_RESULT (unknown when inconclusive). */
      outcome: z.enum(Outcome),
      effect: z.enum(Effect),
      outcome_basis: z.string(),
      journal_seq: z.number().int(),
    }),
  },
  'actions.retry': {
    /** A person retries an unknown action with the same idempotency key (its kept request, resent under the next lease). */
    input: z.strictObject({ action_id: z.string().min(1).max(80) }),
    output: z.object({
      action_id: z.string(),
      ticket: z.number().int().positive(),
      /** The lease generation the retry ran under (null: no lease taken — the record answered). */
      generation: z.number().int().nullable(),
      outcome: z.enum(Outcome),
      effect: z.enum(Effect).nullable(),
      code: z.string().nullable(),
      retry: z.string().nullable(),
      journal_seq: z.number().int(),
    }),
  },
  'actions.precheck': {
    /**
     * Would `actions.reconcile` / `actions.retry` of this action get as far as asking the remote? Answers with the
     * refusal the decision would give before sending anything (NOT_FOUND, DECISION_CONFLICT, UNSUPPORTED_ACTION, …),
     * else `{ok: true}`. A read: nothing is sent, recorded or unsealed, so a surface asks it before a person's proof.
     */
    input: z.strictObject({ action_id: z.string().min(1).max(80), operation: z.enum(['reconcile', 'retry']) }),
    output: z.object({ action_id: z.string(), operation: z.enum(['reconcile', 'retry']), ok: z.literal(true) }),
  },
  'actions.recording': {
    /**
     * An SSH action's session recording (docs/ssh-channel.md): NOT_FOUND, RECORDING_IN_PROGRESS (its command is still
     * in flight), RECORDING_INCOMPLETE or RESULT_EXPIRED.
     */
    input: z.strictObject({ action_id: z.string().min(1).max(80) }),
    output: z.object({
      /** The asciicast v2 text: a header line, then `[seconds, "o" | "e" | "m", data]` lines. */
      cast: z.string(),
      /** The output passed the host entry's output_bytes_max; the cast ends with a "m" truncation marker. */
      truncated: z.boolean(),
      /** The cast's length in UTF-8 bytes. */
      bytes: z.number().int().nonnegative(),
    }),
  },
  'sessions.list': { input: z.strictObject({}), output: z.object({ sessions: z.array(sessionSummarySchema) }) },
  'sessions.approve': { input: z.strictObject({ session_id: z.string().min(1).max(80) }), output: sessionStateSchema },
  'sessions.revoke': {
    input: z.strictObject({ session_id: z.string().min(1).max(80), reason }),
    output: sessionStateSchema,
  },
  metrics: {
    input: z.strictObject({}),
    output: z.object({
      by_phase_outcome: z.array(z.object({ phase: z.enum(Phase), outcome: z.enum(Outcome), count: z.number().int() })),
      by_code: z.array(z.object({ code: z.string(), count: z.number().int() })),
      /**
       * Closed before dispatch by a decision (a person's rejection or cancel, an expiry, the caller withdrawing) or by the
       * broker restarting under it (`restarted`): nothing was sent, not a failure of a phase.
       */
      decisions: z.array(
        z.object({
          decision: z.enum(['rejected', 'expired', 'cancelled', 'withdrawn', 'restarted']),
          count: z.number().int(),
        }),
      ),
      open: z.number().int(),
      total: z.number().int(),
      /** Per-minute counts for the hour up to the newest settled or running action (event times): one series per outcome and per decision; a running action ends the hour but is counted once it settles. */
      rate: z.object({
        until_ms: z.number().int().nullable(),
        bucket_ms: z.number().int().positive(),
        by_outcome: z.array(z.object({ outcome: z.enum(Outcome), counts: z.array(z.number().int()) })),
        by_decision: z.array(
          z.object({
            decision: z.enum(['rejected', 'expired', 'cancelled', 'withdrawn', 'restarted']),
            counts: z.array(z.number().int()),
          }),
        ),
      }),
    }),
  },
  'activity.list': {
    input: z.strictObject({
      from_seq: z.number().int().positive().optional(),
      /** Up to 1000 is accepted; a page holds at most activityPageMax rows and pages on by next_seq. */
      limit: z.number().int().positive().max(1000).optional(),
      session_id: z.string().trim().min(1).max(80).optional(),
      lane: notBlank(200).optional(),
      action_id: z.string().trim().min(1).max(80).optional(),
      /** Events whose own classification says this outcome (rows without one never match). */
      outcome: z.enum(Outcome).optional(),
      /** Events whose own classification carries this code. */
      code: z.string().max(80).optional(),
      /**
       * Case-insensitive substring of the row as shown (event-row-text.ts): kind, action, session, lane, ticket,
       * outcome, code, and the summary as the reader sees it — with `zone`, as the console writes it in that zone (a
       * card's expiry `expires at 2026-12-03 18:28:33 CET`), else as the terminal prints it (ISO UTC).
       */
      text: z.string().trim().min(1).max(200).optional(),
      /** The viewer's time zone (an IANA name) that `text` is matched in; the console sends its own. */
      zone: z.string().min(1).max(64).refine(isTimeZone, 'not a time zone').optional(),
    }),
    output: z.object({ events: z.array(activityEventSchema), next_seq: z.number().int().nullable() }),
  },
  ...vaultApiSchemas,
  ...credentialRequestApiSchemas,
  ...allowlistApiSchemas,
  ...integrityApiSchemas,
  /** OAuth of an upstream MCP server (docs/upstream-mcp.md): a URL for the person's browser, never a token. */
  'mcp_servers.authorize': {
    input: z.strictObject({ server: z.string().min(1).max(32) }),
    output: z.object({
      server: z.string(),
      /** The broker's loopback start link (`http://127.0.0.1:PORT/start?n=…`): one-time, for the person's browser only. */
      authorization_url: z.string(),
      /** The one-time loopback listener closes then; authorize again after it. */
      expires_at_ms: z.number().int(),
    }),
  },
} as const satisfies Record<BrokerApiMethod, { input: z.ZodType; output: z.ZodType }>;

/**
 * The operator API, typed once. The headless HTTP host, the control socket (CLI), the Electron IPC
 * handlers, the preload allow-list and the renderer client are all driven by this map, so a missing
 * handler fails to compile. Approving is an operator capability; agents can never reach this surface.
 */
export type BrokerApi = {
  [M in keyof typeof brokerApiSchemas]: {
    input: z.input<(typeof brokerApiSchemas)[M]['input']>;
    output: z.infer<(typeof brokerApiSchemas)[M]['output']>;
  };
};
export type OperatorInput<M extends BrokerApiMethod> = z.output<(typeof brokerApiSchemas)[M]['input']>;
