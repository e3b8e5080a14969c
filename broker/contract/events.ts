import { z } from 'zod';
import type { ClosedSet } from './closed-set.js';
import { classificationSchema } from './classification.js';
import { anchorFailureCodes } from './anchor-failure-codes.js';
import { OperatorAuth, OperatorSurface } from './operator-actor.js';
import { Channel } from './outcome.js';
import { ApprovalMode } from './route-modes.js';
import { startBoundConfigSettings } from './config-constants.js';

/** Durable event kinds in DESIGN.md §2 order, then observations. Meanings never change. */
export const EventKind = {
  ACTION_ACCEPTED: 'ACTION_ACCEPTED',
  PREFLIGHT_VALIDATED: 'PREFLIGHT_VALIDATED',
  PREFLIGHT_FAILED: 'PREFLIGHT_FAILED',
  CARD_SHOWN: 'CARD_SHOWN',
  APPROVED: 'APPROVED',
  REJECTED: 'REJECTED',
  EXPIRED: 'EXPIRED',
  CANCELLED: 'CANCELLED',
  CREDENTIAL_AUTHORIZED: 'CREDENTIAL_AUTHORIZED',
  SETUP_ATTEMPT_FAILED: 'SETUP_ATTEMPT_FAILED',
  DISPATCH_STARTED: 'DISPATCH_STARTED',
  REQUEST_SENT: 'REQUEST_SENT',
  REMOTE_RESPONSE_STARTED: 'REMOTE_RESPONSE_STARTED',
  REMOTE_RESPONSE_COMPLETE: 'REMOTE_RESPONSE_COMPLETE',
  RESULT_COMMITTED: 'RESULT_COMMITTED',
  RESULT_DELIVERED: 'RESULT_DELIVERED',
  OPERATION_SUBMITTED: 'OPERATION_SUBMITTED',
  OUTCOME_RECORDED: 'OUTCOME_RECORDED',
  CALLER_CANCELLED: 'CALLER_CANCELLED',
  CALLER_DEADLINE_EXCEEDED: 'CALLER_DEADLINE_EXCEEDED',
  CALLER_DISCONNECTED: 'CALLER_DISCONNECTED',
  CONNECTION_LOST: 'CONNECTION_LOST',
  OUTPUT_RECEIVED: 'OUTPUT_RECEIVED',
  EXIT_STATUS: 'EXIT_STATUS',
  EXIT_SIGNAL: 'EXIT_SIGNAL',
  CHANNEL_CLOSED: 'CHANNEL_CLOSED',
  RECONCILIATION_RESULT: 'RECONCILIATION_RESULT',
  OPERATOR_ATTESTED: 'OPERATOR_ATTESTED',
  RETRY_LEASED: 'RETRY_LEASED',
  ABANDONED: 'ABANDONED',
  SESSION_STARTED: 'SESSION_STARTED',
  SESSION_APPROVED: 'SESSION_APPROVED',
  SESSION_REVOKED: 'SESSION_REVOKED',
  SESSION_ENDED: 'SESSION_ENDED',
  SESSION_RECONNECTED: 'SESSION_RECONNECTED',
  CONFIG_APPLIED: 'CONFIG_APPLIED',
  CREDENTIAL_REQUESTED: 'CREDENTIAL_REQUESTED',
  CREDENTIAL_PROVISIONED: 'CREDENTIAL_PROVISIONED',
  CREDENTIAL_REQUEST_DECLINED: 'CREDENTIAL_REQUEST_DECLINED',
  CREDENTIAL_REQUEST_EXPIRED: 'CREDENTIAL_REQUEST_EXPIRED',
  ALLOWLIST_ENTRY_ADDED: 'ALLOWLIST_ENTRY_ADDED',
  ALLOWLIST_ENTRY_REMOVED: 'ALLOWLIST_ENTRY_REMOVED',
  INTEGRITY_READOPTED: 'INTEGRITY_READOPTED',
} as const satisfies ClosedSet<string>;
export type EventKind = keyof typeof EventKind;

/** One line per kind; docs/events.md and the Activity view use these. */
export const eventKindMeanings: Readonly<Record<EventKind, string>> = {
  ACTION_ACCEPTED: 'Ticket issued, lane chosen, request fingerprint bound.',
  PREFLIGHT_VALIDATED: 'Validation passed; only now may a card be shown.',
  PREFLIGHT_FAILED: 'Validation refused the request before any secret or host was touched.',
  CARD_SHOWN: 'An approval card became visible to a person.',
  APPROVED: 'A person or policy approved the bound fingerprint (a waiting decision).',
  REJECTED: 'A person rejected the ticket (terminal).',
  EXPIRED: 'The approval window closed without a decision (terminal).',
  CANCELLED: 'The ticket was cancelled before dispatch (terminal).',
  CREDENTIAL_AUTHORIZED: 'Credential id, version tag and injection mode chosen; fingerprint re-checked.',
  SETUP_ATTEMPT_FAILED: 'A fresh connection failed before the application channel existed.',
  DISPATCH_STARTED: 'Durable before the first application byte reaches the transport.',
  REQUEST_SENT: 'The request was handed to the transport (headers/body written, or SSH exec sent).',
  REMOTE_RESPONSE_STARTED: 'The remote began answering (status line, or exec reply).',
  REMOTE_RESPONSE_COMPLETE: 'The remote answer is complete by its framing (or exit status + close).',
  RESULT_COMMITTED: 'Settled outcome, result digest and retrievable result are durable.',
  RESULT_DELIVERED: 'The caller acknowledged a complete handoff.',
  OPERATION_SUBMITTED: 'A 202 created a remote job: its id and status location, tracked as a separate operation.',
  OUTCOME_RECORDED: 'The broker recorded its classification of what is known so far.',
  CALLER_CANCELLED: 'The caller cancelled (a caller event; it decides the effect only before dispatch).',
  CALLER_DEADLINE_EXCEEDED: "The caller's deadline passed (a caller event).",
  CALLER_DISCONNECTED: 'The caller disconnected (a caller event).',
  CONNECTION_LOST: 'The transport connection closed or broke.',
  OUTPUT_RECEIVED: 'Output bytes were received (counts only).',
  EXIT_STATUS: 'The remote command reported an exit status.',
  EXIT_SIGNAL: 'The remote command reported it was killed by a signal.',
  CHANNEL_CLOSED: 'The SSH channel closed.',
  RECONCILIATION_RESULT: 'A later lookup learned the remote outcome (source remote_query).',
  OPERATOR_ATTESTED: 'A person settled the outcome with a written basis (source operator_attested).',
  RETRY_LEASED:
    'A worker took the one retry lease on this invocation: the next retry generation, its holder and expiry (a stale generation is fenced before dispatch).',
  ABANDONED: 'A person released the lane behind this unknown head, with a reason; the outcome stays unknown.',
  SESSION_STARTED:
    'A new agent process connected: its kernel-reported identity (pid, uid, start time, executable, cwd), and `allowlist_withheld` when an allowlist entry matched its executable but did not apply (an injection variable\'s name, a tracer, or a TCP listener such as node\'s inspector; docs/queue.md, "Process allowlist").',
  SESSION_APPROVED:
    'A person (or observe-mode policy) approved the agent process once; session-approval calls may proceed.',
  SESSION_REVOKED: 'A person revoked the session: its new calls are refused and its undispatched tickets cancelled.',
  SESSION_ENDED: 'The agent process exited (or the broker found it gone); its undispatched tickets were cancelled.',
  SESSION_RECONNECTED:
    'The same agent process (pid + start time) opened its recorded session again: a shim reconnecting after a broker restart or a lost connection, or another connection of that process.',
  CONFIG_APPLIED:
    'A configuration a person accepted (or edited) took effect without a restart, or the file present when a person created the vault was trusted on first use: its digest, who, how, and the settings waiting for one.',
  CREDENTIAL_REQUESTED:
    'An agent asked for a credential it lacks (request_credential): its purpose, what it is for and the hints it gave; never a value.',
  CREDENTIAL_PROVISIONED:
    'A person answered a credential request: a credential added to the vault or an existing one bound, by id and name (never its value).',
  CREDENTIAL_REQUEST_DECLINED: 'A person declined a credential request, with an optional reason for the agent.',
  CREDENTIAL_REQUEST_EXPIRED:
    'A credential request waited its time (agents.credential_request_ttl_s) without an answer.',
  ALLOWLIST_ENTRY_ADDED:
    'A person added an executable (absolute path + sha256) to the process allowlist, optionally scoped to routes/hosts: a matching agent process skips the session card.',
  ALLOWLIST_ENTRY_REMOVED: 'A person removed a process allowlist entry: sessions opened after it get a card again.',
  INTEGRITY_READOPTED:
    'A person adopted the journal as it is after the start quarantined it (its integrity anchor disagreed): what was found, and who decided.',
};

/** Kinds that describe an agent session; their subject id (the action_id column) is a `ses_` id. */
export const sessionEventKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'SESSION_STARTED',
  'SESSION_APPROVED',
  'SESSION_REVOKED',
  'SESSION_ENDED',
  'SESSION_RECONNECTED',
]);
export function isSessionEventKind(kind: EventKind): boolean {
  return sessionEventKinds.has(kind);
}

/** Kinds that describe the broker's configuration; their subject id is a `cfg_` id (the first 16 hex of the digest). */
export const configEventKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'CONFIG_APPLIED',
  'ALLOWLIST_ENTRY_ADDED',
  'ALLOWLIST_ENTRY_REMOVED',
  'INTEGRITY_READOPTED',
]);
export function isConfigEventKind(kind: EventKind): boolean {
  return configEventKinds.has(kind);
}

/** Kinds that describe an agent's credential request; their subject id is a `crq_` id. */
export const credentialRequestEventKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'CREDENTIAL_REQUESTED',
  'CREDENTIAL_PROVISIONED',
  'CREDENTIAL_REQUEST_DECLINED',
  'CREDENTIAL_REQUEST_EXPIRED',
]);
export function isCredentialRequestEventKind(kind: EventKind): boolean {
  return credentialRequestEventKinds.has(kind);
}

/**
 * Who made a decision. `process` is an operator call with no person's proof, accepted only under
 * `operator.unattended_decisions` (its id: `<exe> pid <pid>` from the kernel). `surface` and `auth`
 * say where a decision came from and how that surface proved a person; absent on events recorded
 * before they existed, and on policy, agent and broker actors.
 */
export const Actor = z.object({
  kind: z.enum(['person', 'policy', 'agent', 'broker', 'process']),
  id: z.string().max(200),
  surface: z.enum(OperatorSurface).optional(),
  auth: z.enum(OperatorAuth).optional(),
});
export type Actor = z.infer<typeof Actor>;

const sha256 = z.string().regex(/^sha256:[0-9a-f]{64}$/);
/** A process allowlist entry's id (`alw_` and 16 hex digits). */
export const allowlistEntryIdSchema = z.string().regex(/^alw_[0-9a-f]{16}$/);
/**
 * A macOS code-signing identity as `codesign -d` names it: the signing identifier and the Apple team id (ten
 * upper-case letters or digits). Only a signature that verifies and names a team has one (ad-hoc: none).
 */
export const codeSigningSchema = z.strictObject({
  identifier: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/),
  team_id: z.string().regex(/^[A-Z0-9]{10}$/),
});
export type CodeSigning = z.infer<typeof codeSigningSchema>;
export const actionIdSchema = z.string().regex(/^act_[0-9A-Za-z_-]{6,60}$/);
const attempt = z.number().int().positive();
/**
 * How many characters a card's bound hid of one query or header pair's name and of its value: a structured fact the
 * card shows beside the text, never a mark inside it (an agent can end a value with "…" itself).
 */
export const cardPairCutSchema = z.strictObject({
  name_hidden: z.number().int().nonnegative(),
  value_hidden: z.number().int().nonnegative(),
});
/**
 * The broker's own last pair of a list it cut: how many of the agent's pairs are not shown. Only the broker writes this
 * third element (an agent's pair can carry a cut at most), so a surface shows the count from it, apart from the
 * agent's pairs, never from the pair's text: an agent can name a query parameter "…" with the value "6 more not
 * shown" itself. Its text, `["…", "N more not shown"]`, is for a reader that does not know the element.
 */
export const cardPairsHiddenSchema = z.strictObject({ pairs_hidden: z.number().int().positive() });
/**
 * A card's query or header pair as a card shows it and ACTION_ACCEPTED `request_view` keeps it: name and value, each
 * bounded (512 characters), and when either was cut, how much of each is hidden; or the broker's summary of the pairs
 * it did not show (cardPairsHiddenSchema). Older events have no cut and may end a cut side with "…" (hence 513), and
 * their summary is a bare `["…", "N more not shown"]`: they stay readable, shown as they were.
 */
export const cardPairSchema = z.tuple([
  z.string().max(513),
  z.string().max(513),
  z.union([cardPairCutSchema, cardPairsHiddenSchema]).optional(),
]);
export type CardPair = z.infer<typeof cardPairSchema>;
export type CardPairCut = z.infer<typeof cardPairCutSchema>;

/** Pairs a card shows per list (the last one may say how many more are not shown). */
const cardViewPairsMax = 32;

/**
 * An agent-chosen idempotency key and what it is bound to. The key is an identifier, not a
 * secret, but it is bounded: visible ASCII, at most 1024 characters (the request schema's cap).
 */
export const idempotencyKeyBindingSchema = z.strictObject({
  /** The route name: keys are bound per route and scope. */
  route: z.string().min(1).max(64),
  /** The contract's scope (what the remote scopes keys to). */
  scope: z.string().min(1).max(200),
  key: z.string().regex(/^[\x21-\x7e]{1,1024}$/),
  /** sha256 over the request parts the contract names (what the remote compares for a repeated key). */
  fingerprint: sha256,
  /** Earliest safe expiry: taken before dispatch, so never later than the remote's own window ends. */
  expires_at_ms: z.number().int().nonnegative(),
});
export type IdempotencyKeyBinding = z.infer<typeof idempotencyKeyBindingSchema>;

/** One member of a declared batch: its remote id and what is known about it alone. */
export const batchMemberSchema = z.strictObject({
  id: z.string().min(1).max(200),
  outcome: z.enum(['committed', 'rejected', 'unknown']),
  effect: z.enum(['succeeded', 'failed', 'rejected', 'unknown_effect']),
  retry: z.enum(['never', 'after_correction', 'same_idempotency_key', 'reconcile']),
  /** The member's own status value as the response gave it (bounded), when it gave one. */
  status: z.string().max(100).optional(),
});
export const batchOutcomeSchema = z.strictObject({
  members: z.array(batchMemberSchema).max(1000),
  /** Ids of the members the remote reports complete (partial_effect's remote object ids). */
  completed_ids: z.array(z.string().min(1).max(200)).max(1000),
});
export type BatchMember = z.infer<typeof batchMemberSchema>;
export type BatchOutcome = z.infer<typeof batchOutcomeSchema>;

/**
 * Payload schemas per kind. Payloads never hold secrets: ids, version tags, digests only. They are
 * strict: a field the schema does not name is refused, so nothing can ride along into the journal.
 */
export const eventPayloadSchemas = {
  ACTION_ACCEPTED: z.strictObject({
    channel: z.enum(Channel),
    /** Sanitized target: route/host entry name and method + path template or command digest. */
    target: z.string().max(2048),
    request_fingerprint: sha256,
    approval: z.enum(ApprovalMode),
    /** Whether the operation is known to be idempotent (method semantics or declared contract). */
    idempotent: z.boolean(),
    /**
     * Set on a reconciliation lookup only: the unknown action this lookup asks the remote about.
     * Such an action needs no approval (the person who asked to reconcile is it) and takes no
     * lane (it must not queue behind the head it settles). Optional: older events stay valid.
     */
    reconciles: actionIdSchema.optional(),
    /**
     * HTTP: the route's base URL when the action was admitted. A retry or a reconciliation lookup goes to the route as
     * configured now; if a person re-pointed it since, asking the new server would prove nothing about this action
     * (and resending its key there could apply it twice), so both are refused. Optional: older events stay valid.
     */
    origin: z.string().max(2048).optional(),
    /**
     * HTTP: the credential the route named when the action was admitted, by its stable id and the version tag that
     * changes at every rotation (never the name, never the secret). DESIGN §3: the invocation binds the credential
     * version; a rotated or replaced credential at dispatch is FINGERPRINT_MISMATCH, never a send under another
     * secret. Absent: none was known at admission (older events too): nothing to compare.
     */
    credential: z.strictObject({ id: z.string().min(1).max(200), version_tag: z.string().min(1).max(200) }).optional(),
    /**
     * Retries allowed after the first attempt, bound from the route's retry policy at admission
     * (a configuration snapshot: a later config change does not widen it). Absent: 0.
     */
    retry_budget: z.number().int().min(0).max(10).optional(),
    /**
     * The route rule that set `approval` (and maybe the lane), as its words at admission
     * (`rules[1]: POST /documents/** → per_call`), so the card and the journal say why a call needs a
     * person even after the configuration changed. Absent: the route's own approval applied.
     */
    approval_rule: z.string().min(1).max(300).optional(),
    /**
     * HTTP, a request validation passed: what its approval card shows of the request beyond the target, as the
     * agent sent it before any injection and bounded as the card bounds it (broker/queue card-preview.ts). Only in
     * this sealed payload, never in the plaintext `actions` table (the target stays sanitized): a card rebuilt from
     * the journal (a blocked head after its executor returned, or after a restart) reads it back while the event
     * can be opened (this run's, or an earlier run's with the unlocked vault). Never the credential: the agent
     * cannot set its header or query parameter, and injection comes later. Never the body, only its size.
     * Optional: older events and refused requests have none.
     */
    request_view: z
      .strictObject({
        query: z.array(cardPairSchema).max(cardViewPairsMax),
        headers: z.array(cardPairSchema).max(cardViewPairsMax),
        body_bytes: z.number().int().nonnegative(),
      })
      .optional(),
  }),
  PREFLIGHT_VALIDATED: z.strictObject({
    /**
     * The idempotency key bound at admission, on a route that declares a contract and a call that
     * passed a key (DESIGN §3: key, fingerprint, scope and earliest safe expiry stored before
     * dispatch). Optional: events written before it and calls without a key stay valid.
     */
    idempotency: idempotencyKeyBindingSchema.optional(),
    /**
     * Values of the route's declared correlation fields (`correlation.request_fields`), taken from
     * the JSON request body at admission, for a bounded read-back after an unknown outcome. They are
     * identifiers the configuration names (an external reference), never credentials.
     */
    correlation_values: z.record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/), z.string().max(200)).optional(),
  }),
  PREFLIGHT_FAILED: z.strictObject({ field: z.string().max(256).optional() }),
  CARD_SHOWN: z.strictObject({ expires_at_ms: z.number().int().nonnegative() }),
  APPROVED: z.strictObject({ actor: Actor, request_fingerprint: sha256 }),
  REJECTED: z.strictObject({ actor: Actor, reason: z.string().max(2000) }),
  EXPIRED: z.strictObject({}),
  CANCELLED: z.strictObject({ actor: Actor, reason: z.string().max(2000) }),
  CREDENTIAL_AUTHORIZED: z.strictObject({
    credential_id: z.string().max(200),
    version_tag: z.string().max(200),
    injection_mode: z.string().max(64),
    request_fingerprint: sha256,
  }),
  SETUP_ATTEMPT_FAILED: z.strictObject({ attempt, stage: z.string().max(64), detail: z.string().max(500).optional() }),
  DISPATCH_STARTED: z.strictObject({
    attempt,
    connection: z.enum(['fresh', 'reused']),
    connection_id: z.string().max(128).optional(),
    /** The verified peer: TLS certificate SHA-256 or SSH host key `SHA256:…` fingerprint. */
    peer_identity: z.string().max(128).optional(),
    /** Why the peer was trusted: a pin, a CA chain, a stored known host, or first use (accept_new). */
    peer_trust: z.enum(['pinned', 'ca_verified', 'known_host', 'accepted_new']).optional(),
    /**
     * The retry generation of the lease this attempt runs under (RETRY_LEASED). Required once a
     * lease exists: the journal refuses a DISPATCH_STARTED whose generation is not the current,
     * unexpired lease's (LEASE_LOST), so a stale worker is stopped before its first byte.
     */
    generation: z.number().int().positive().optional(),
  }),
  REQUEST_SENT: z.strictObject({ attempt, request_complete: z.boolean() }),
  REMOTE_RESPONSE_STARTED: z.strictObject({
    attempt,
    status: z.number().int().optional(),
    /** The provider's own request id (the route's `correlation.provider_request_id_header`), a correlation for reconciliation. */
    provider_request_id: z.string().min(1).max(200).optional(),
  }),
  REMOTE_RESPONSE_COMPLETE: z.strictObject({ attempt, digest: sha256.optional() }),
  RESULT_COMMITTED: z.strictObject({
    attempt,
    result_id: z.string().max(128),
    result_digest: sha256,
    /** A declared batch: the outcome of every member the request named (article 000: a parent result plus one per member). */
    batch: batchOutcomeSchema.optional(),
  }),
  // The result handed over (absent in events written before it was named: those fold as before).
  RESULT_DELIVERED: z.strictObject({ result_id: z.string().min(1).max(128).optional() }),
  OPERATION_SUBMITTED: z.strictObject({
    attempt,
    result_id: z.string().max(128),
    /** The job or operation id the remote returned, if it named one. */
    job_id: z.string().min(1).max(200).optional(),
    /** Where the remote says the job's status can be read (Location / Operation-Location). */
    status_location: z.string().min(1).max(2048).optional(),
  }),
  OUTCOME_RECORDED: z.strictObject({ attempt: attempt.optional() }),
  CALLER_CANCELLED: z.strictObject({ stage: z.string().max(64) }),
  CALLER_DEADLINE_EXCEEDED: z.strictObject({ stage: z.string().max(64) }),
  CALLER_DISCONNECTED: z.strictObject({ stage: z.string().max(64) }),
  CONNECTION_LOST: z.strictObject({ attempt }),
  OUTPUT_RECEIVED: z.strictObject({
    attempt,
    stream: z.enum(['stdout', 'stderr', 'body']),
    bytes: z.number().int().nonnegative(),
  }),
  EXIT_STATUS: z.strictObject({ attempt, exit_status: z.number().int() }),
  EXIT_SIGNAL: z.strictObject({ attempt, signal: z.string().max(32) }),
  CHANNEL_CLOSED: z.strictObject({ attempt }),
  RECONCILIATION_RESULT: z.strictObject({
    correlation: z.enum(['idempotency_token', 'operation_id', 'provider_request_id', 'bounded_read_back']),
    lookup_action_id: z.string().max(64),
    /** Who asked for the lookup (a person); absent when automation asked. */
    actor: Actor.optional(),
    /** Why this correlation is enough, or why ambiguity remains (a bounded read-back says how many matched). */
    note: z.string().max(500).optional(),
    /**
     * How many attempts the action had when the lookup started; the journal refuses the result if a
     * retry ran since (a lookup before an attempt says nothing about that attempt). Optional: older events.
     */
    attempts_seen: z.number().int().nonnegative().optional(),
    /** A bounded read-back: how many candidate objects matched every recorded field, of how many read. */
    read_back: z
      .strictObject({ matched: z.number().int().nonnegative(), examined: z.number().int().nonnegative() })
      .optional(),
  }),
  OPERATOR_ATTESTED: z.strictObject({ actor: Actor, basis: z.string().min(1).max(4000) }),
  RETRY_LEASED: z.strictObject({
    /** 1 for the first retry; always the recorded generation + 1 (the journal's compare-and-swap). */
    generation: z.number().int().positive(),
    /** Which worker holds it (an opaque worker id), for the record. */
    holder: z.string().min(1).max(200),
    /** After this wall time the lease is dead: its worker's DISPATCH_STARTED is refused. */
    expires_at_ms: z.number().int().nonnegative(),
    /** decideRetry's verdict that licensed this retry. */
    decision: z.enum(['RETRY_NEW_ATTEMPT', 'RETRY_SAME_KEY', 'RETRY_WHEN_ALLOWED']),
    /** Who asked: automation (broker policy), the agent (retry_of), or a person. */
    requested_by: Actor,
  }),
  ABANDONED: z.strictObject({ actor: Actor, reason: z.string().min(1).max(2000) }),
  SESSION_STARTED: z.strictObject({
    pid: z.number().int().positive(),
    uid: z.number().int().nonnegative(),
    /** Process start time as the kernel reports it (Linux: clock ticks since boot, /proc/<pid>/stat field 22). */
    start_time: z.string().max(64),
    ppid: z.number().int().nonnegative().nullable(),
    exe: z.string().max(4096).nullable(),
    cwd: z.string().max(4096).nullable(),
    /** The parent's executable. For `postern mcp` the session process is the MCP client behind the shim, so this is the client's parent. */
    parent_exe: z.string().max(4096).nullable(),
    /** MCP clientInfo: a label the client chose, never identity. */
    client_name: z.string().max(200).nullable(),
    client_version: z.string().max(100).nullable(),
    /**
     * Why the process allowlist did not apply although an entry matched the executable (`LD_PRELOAD set`, `the
     * process is being traced (ptrace)`, `the process listens on a TCP port …`): a variable's or option's name, never
     * a value (no port either). Absent: nothing withheld it.
     */
    allowlist_withheld: z.string().min(1).max(200).optional(),
  }),
  SESSION_APPROVED: z.strictObject({ actor: Actor }),
  SESSION_REVOKED: z.strictObject({ actor: Actor, reason: z.string().min(1).max(2000) }),
  SESSION_ENDED: z.strictObject({ reason: z.enum(['process_exited', 'broker_found_gone']) }),
  /** MCP clientInfo of the new connection: a label, never identity (the identity is the session's). */
  SESSION_RECONNECTED: z.strictObject({
    client_name: z.string().max(200).nullable(),
    client_version: z.string().max(100).nullable(),
  }),
  CONFIG_APPLIED: z.strictObject({
    /** sha256 of the postern.yaml text now in force (what config.pending and `postern config accept` name). */
    digest: sha256,
    /** Who accepted it (actorLabel: a person and their surface, or the unattended process). */
    by: z.string().min(1).max(300),
    /**
     * `accepted` on a card (config.accept), `edited` through config.edit, `first_use`: the file a new data directory
     * started with, sealed at its first unlock without a person's acceptance (`by` says so).
     */
    how: z.enum(['accepted', 'edited', 'first_use']),
    /** Changed settings that are read only at start: they keep their old value until the next start. */
    restart_needed_for: z.array(z.enum(startBoundConfigSettings)).max(startBoundConfigSettings.length),
  }),
  // The agent's words, as the request schema (agent-api.ts) admitted them: bounded, no control or bidi characters.
  CREDENTIAL_REQUESTED: z.strictObject({
    purpose: z.string().min(1).max(500),
    for: z.union([
      z.strictObject({ route: z.string().min(1).max(64) }),
      z.strictObject({ host: z.string().min(1).max(260) }),
    ]),
    kind: z.enum(['bearer', 'header', 'basic', 'query', 'ssh_key', 'aws_sigv4', 'oauth2_client']).optional(),
    header: z.string().min(1).max(64).optional(),
    format: z.string().max(200).optional(),
    docs_url: z.string().max(2048).optional(),
    scopes: z.array(z.string().min(1).max(100)).max(20).optional(),
    session_id: z.string().max(64),
  }),
  CREDENTIAL_PROVISIONED: z.strictObject({
    actor: Actor,
    credential_id: z.string().min(1).max(200),
    credential_name: z.string().min(1).max(64),
    /** `added`: a new credential the person pasted; `bound_existing`: one the vault held (maybe with a new binding). */
    how: z.enum(['added', 'bound_existing']),
  }),
  CREDENTIAL_REQUEST_DECLINED: z.strictObject({ actor: Actor, reason: z.string().max(2000).optional() }),
  CREDENTIAL_REQUEST_EXPIRED: z.strictObject({}),
  // The process allowlist (docs/queue.md): every entry event shares one subject, allowlistSubjectId.
  ALLOWLIST_ENTRY_ADDED: z.strictObject({
    entry_id: allowlistEntryIdSchema,
    /** The executable's absolute path as the kernel names it (/proc/<pid>/exe). */
    path: z.string().min(1).max(4096),
    /** sha256 of the file's bytes, computed by the broker (never taken from a client). */
    sha256,
    /** Empty: every route and host. Otherwise the session card is skipped only for actions on these. */
    routes: z.array(z.string().min(1).max(64)).max(64),
    hosts: z.array(z.string().min(1).max(260)).max(64),
    actor: Actor,
    /** The session whose card offered "always allow this executable", when it came from one. */
    from_session: z.string().max(64).optional(),
    /** macOS: the executable's code-signing identity when it had one; the entry then matches only with it. */
    signing: codeSigningSchema.optional(),
  }),
  ALLOWLIST_ENTRY_REMOVED: z.strictObject({ entry_id: allowlistEntryIdSchema, actor: Actor }),
  // The signed integrity anchor (docs/audit.md): what the start found, and the person who adopted the journal anyway.
  INTEGRITY_READOPTED: z.strictObject({
    /** One list with the operator API's: a code added to it is one this event may carry. */
    code: z.enum(anchorFailureCodes),
    /** The anchor's counter and head as read (null: none readable), and the journal's head at the decision. */
    anchor_counter: z.number().int().nullable(),
    anchor_head_seq: z.number().int().nullable(),
    journal_last_seq: z.number().int().nonnegative(),
    actor: Actor,
  }),
} as const satisfies { [K in EventKind]: z.ZodType };

export type EventPayload<K extends EventKind> = z.infer<(typeof eventPayloadSchemas)[K]>;

/** Kinds whose event must carry a classification (they settle or close something). */
export const kindsRequiringClassification: ReadonlySet<EventKind> = new Set<EventKind>([
  'PREFLIGHT_FAILED',
  'REJECTED',
  'EXPIRED',
  'CANCELLED',
  'RESULT_COMMITTED',
  'OUTCOME_RECORDED',
  'RECONCILIATION_RESULT',
  'OPERATOR_ATTESTED',
]);

/** An event as the broker asks to append it; the journal assigns seq and wall time. */
export type NewEvent = {
  [K in EventKind]: {
    kind: K;
    action_id: string;
    session_id?: string | null;
    /** Assigned by the journal on ACTION_ACCEPTED; copied from the action afterwards. */
    ticket?: number | null;
    lane?: string | null;
    payload: EventPayload<K>;
    classification?: z.infer<typeof classificationSchema>;
  };
}[EventKind];

/** A durable event: append position (seq) and wall time added by the journal. */
export type JournalEvent = NewEvent & {
  seq: number;
  at_ms: number;
  session_id: string | null;
  ticket: number | null;
  lane: string | null;
};

export const sessionIdSchema = z.string().regex(/^ses_[0-9A-Za-z_-]{6,60}$/);
/** A credential request's subject (request_credential's `request_id`). */
export const credentialRequestIdSchema = z.string().regex(/^crq_[0-9A-Za-z_-]{6,60}$/);
/** A configuration event's subject: `cfg_` and the first 16 hex digits of the configuration's sha256. */
export const configSubjectIdSchema = z.string().regex(/^cfg_[0-9a-f]{16}$/);
/** The subject id of a configuration event for `sha256:<hex>`. */
export function configSubjectId(digest: string): string {
  return `cfg_${digest.slice('sha256:'.length, 'sha256:'.length + 16)}`;
}
/**
 * An event's subject: an action (`act_…`), for SESSION_* kinds an agent session (`ses_…`), for
 * CONFIG_* kinds a configuration (`cfg_…`), for CREDENTIAL_REQUEST* kinds an agent's credential request (`crq_…`).
 * All live in the events table's action_id column so one hash chain covers them.
 */
export const newEventSchema = z.object({
  kind: z.enum(EventKind),
  action_id: z.union([actionIdSchema, sessionIdSchema, configSubjectIdSchema, credentialRequestIdSchema]),
  session_id: z.string().max(64).nullable().optional(),
  ticket: z.number().int().positive().nullable().optional(),
  lane: z.string().max(200).nullable().optional(),
  payload: z.unknown(),
  classification: classificationSchema.optional(),
});
