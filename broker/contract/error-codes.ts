import type { ClosedSet } from './closed-set.js';

/**
 * Who answers with a code. A code keeps one meaning on every surface that uses it; the surfaces
 * only say where a caller can meet it (docs/error-codes.md has a column for them).
 */
export const CodeSource = {
  broker: 'broker',
  operator_host: 'operator_host',
  desktop: 'desktop',
  audit_verify: 'audit_verify',
  operator_ui: 'operator_ui',
  sdk: 'sdk',
} as const satisfies ClosedSet<'broker' | 'operator_host' | 'desktop' | 'audit_verify' | 'operator_ui' | 'sdk'>;
export type CodeSource = keyof typeof CodeSource;

export const codeSourceMeanings: { readonly [S in CodeSource]: string } = {
  broker:
    "The broker's coded errors: envelopes, the agent socket, the control socket, operator API replies and the CLI.",
  operator_host: 'The operator HTTP host itself, before a request reaches an operator API handler.',
  desktop: "The desktop shell's IPC gate (app/main/ipc-gate.ts), before a call reaches the broker.",
  audit_verify: '`postern audit verify`, the offline verifier of a journal file.',
  operator_ui: 'The operator UI itself, when no Reply came back from the broker.',
  sdk: 'The agent SDK (`connectPostern`), when no answer came back from the broker.',
};

interface CodeEntry {
  readonly from: readonly CodeSource[];
  readonly meaning: string;
}

const broker = ['broker'] as const;
const host = ['operator_host'] as const;
const desktop = ['desktop'] as const;
const verify = ['audit_verify'] as const;
const operatorUi = ['operator_ui'] as const;
const sdk = ['sdk'] as const;

/**
 * THE registry: every stable machine code Postern answers with, on any surface, each with its one
 * meaning. Codes never change meaning; new ones may be added. A code two surfaces share means the
 * same there (NOT_FOUND is "nothing by that name" for an action id and for an API path alike).
 * docs/error-codes.md is generated from it (`node --import tsx scripts/write-error-codes.mjs`;
 * tests/error-codes-doc.test.ts fails and shows the diff when the page is stale).
 */
export const errorCodeRegistry = {
  // validation: refused before a secret is touched or a host resolved
  INVALID_ARGUMENT: {
    from: ['broker', 'operator_host', 'desktop', 'sdk'],
    meaning:
      'A required field is missing or malformed (a request body that is not JSON included); the field path says which where there is one.',
  },
  INVALID_TARGET: {
    from: broker,
    meaning: 'The target (route, path, host entry) is malformed, unknown or escapes its base.',
  },
  UNSUPPORTED_ACTION: { from: broker, meaning: 'The action or method is not supported for this target.' },
  PAYLOAD_LIMIT: {
    from: ['broker', 'operator_host'],
    meaning:
      'A body, header, URL or command exceeds its size limit (a configured one, or the fixed limit of the surface that received it).',
  },
  FORBIDDEN_HEADER: {
    from: broker,
    meaning: 'The agent set a header the broker owns (Authorization, Host, Cookie, Proxy-*, the injected header).',
  },
  UNKNOWN_CREDENTIAL: { from: broker, meaning: 'The referenced credential does not exist; its name is never echoed.' },
  FINGERPRINT_MISMATCH: {
    from: broker,
    meaning: 'The request no longer matches the fingerprint that was approved; nothing was sent.',
  },
  IDEMPOTENCY_MISMATCH: {
    from: broker,
    meaning: 'An idempotency key was reused with a different request fingerprint; nothing was sent.',
  },
  CONFIG_INVALID: {
    from: broker,
    meaning: 'The configuration file is malformed or breaks a rule; the field path says which.',
  },
  CONFIG_UNTRUSTED: {
    from: broker,
    meaning:
      'The accepted configuration failed its integrity check; every route and host is refused until a person accepts a configuration again.',
  },
  CONFIG_PENDING: {
    from: broker,
    meaning:
      'postern.yaml holds a change no person has accepted; a person reviews and accepts it (Routes & hosts, operator method config.accept) first.',
  },
  // credential_injection: local gates before dispatch
  VAULT_LOCKED: { from: broker, meaning: 'The vault is locked; retry after it is unlocked.' },
  CREDENTIAL_MISSING: {
    from: broker,
    meaning: 'The credential exists in configuration but has no usable secret; correct it first.',
  },
  OAUTH_TOKEN_UNAVAILABLE: {
    from: broker,
    meaning:
      'No OAuth2 access token could be obtained before dispatch (its token fetch is its own action, which says why); nothing was sent.',
  },
  // vault: the encrypted credential store (broker/vault)
  VAULT_NOT_INITIALIZED: {
    from: broker,
    meaning: 'The vault has not been created yet; run `postern vault init` first.',
  },
  VAULT_ALREADY_INITIALIZED: {
    from: broker,
    meaning: 'The vault already exists; it is never re-created over an existing one.',
  },
  VAULT_PASSPHRASE_INVALID: {
    from: broker,
    meaning: 'The vault passphrase is wrong; nothing was unlocked or changed.',
  },
  VAULT_CORRUPT: {
    from: broker,
    meaning:
      'The vault file is damaged, newer than this Postern, or a sealed value failed its integrity check; nothing was decrypted.',
  },
  VAULT_KEY_PROTECTED: {
    from: broker,
    meaning:
      "The vault key is also sealed by the desktop app's OS keyring (safeStorage); only the Postern desktop app, on the machine and login that protected it, can unlock it.",
  },
  VAULT_KEY_PROTECTOR_FAILED: {
    from: broker,
    meaning:
      'The OS keyring protecting the vault key refused or failed (locked, another login or machine, or a damaged blob); nothing was unlocked or changed.',
  },
  CREDENTIAL_EXISTS: {
    from: broker,
    meaning: 'A credential with this name already exists; rotate it or remove it first.',
  },
  APPROVAL_DENIED: { from: broker, meaning: 'A person rejected this invocation; it will never be sent.' },
  APPROVAL_EXPIRED: { from: broker, meaning: 'The approval window closed before a decision; nothing was sent.' },
  SESSION_REVOKED: {
    from: broker,
    meaning:
      "A person revoked the agent session: its waiting tickets were cancelled before dispatch and its process's new calls are refused; nothing was sent.",
  },
  SESSION_ENDED: {
    from: broker,
    meaning:
      "The agent's process was gone (the session sweeper ended its session): its waiting tickets were closed before dispatch and any later call or reconnection from that process is refused; nothing was sent. Nobody revoked it: counted as withdrawn, not as a person's cancel. A new agent process gets a new session.",
  },
  CALLER_CANCELLED: {
    from: broker,
    meaning: 'The caller cancelled; before dispatch nothing was sent, after dispatch the effect is unknown.',
  },
  CALLER_DEADLINE_EXCEEDED: {
    from: broker,
    meaning: 'The caller stopped waiting; before dispatch nothing was sent, after dispatch the effect is unknown.',
  },
  // connection_setup: a fresh connection failed before the application channel existed
  DNS_FAILED: { from: broker, meaning: 'The target host name could not be resolved; nothing was sent.' },
  CONNECT_REFUSED: { from: broker, meaning: 'The TCP connection was refused; nothing was sent.' },
  CONNECT_TIMEOUT: { from: broker, meaning: 'The TCP connection was not established in time; nothing was sent.' },
  NETWORK_UNREACHABLE: { from: broker, meaning: 'No route to the target network; nothing was sent.' },
  TLS_FAILED: { from: broker, meaning: 'The TLS handshake or certificate verification failed; nothing was sent.' },
  PROXY_FAILED: { from: broker, meaning: 'The proxy tunnel could not be opened; nothing was sent.' },
  SSH_TRANSPORT_FAILED: {
    from: broker,
    meaning:
      'The SSH transport failed during setup (key exchange, or the connection closed or stalled, user auth included); nothing was sent.',
  },
  SSH_HOST_KEY_REJECTED: {
    from: broker,
    meaning: "The SSH server's host key did not match the pinned or stored key; nothing was sent.",
  },
  SSH_KNOWN_HOSTS_UNTRUSTED: {
    from: broker,
    meaning:
      'known_hosts.json (the host keys accept_new remembered) failed its integrity check or could not be checked (vault locked); no key in it is trusted and nothing was sent. A person checks the hosts and removes the file.',
  },
  SSH_AUTH_FAILED: { from: broker, meaning: 'The SSH server rejected the user key; nothing was sent.' },
  SSH_CHANNEL_FAILED: { from: broker, meaning: 'The SSH session channel could not be opened; nothing was sent.' },
  MCP_SPAWN_FAILED: {
    from: broker,
    meaning:
      "The upstream MCP server's process could not be started, or is backing off after it crashed (the message says until when); nothing was sent.",
  },
  MCP_INITIALIZE_FAILED: {
    from: broker,
    meaning: 'The upstream MCP server did not complete the MCP initialize handshake; nothing was sent.',
  },
  MCP_AUTHORIZATION_REQUIRED: {
    from: broker,
    meaning:
      'The upstream MCP server needs OAuth and holds no usable grant (never authorized, or its refresh was refused): a person runs postern mcp-servers authorize NAME; nothing was sent.',
  },
  // remote_execution: dispatched; what the remote said (or did not)
  REMOTE_OUTCOME_UNKNOWN: {
    from: broker,
    meaning: 'Dispatch may have reached the remote and no deciding result was recorded.',
  },
  OPERATION_TIMEOUT: {
    from: broker,
    meaning:
      "The route's or SSH host's operation deadline (timeout_ms in postern.yaml) passed before a complete result; a broker-side limit, not a caller event.",
  },
  REMOTE_RESULT_INCOMPLETE: {
    from: broker,
    meaning: 'The remote ended without a complete result (partial body, no exit status).',
  },
  REMOTE_REJECTED: {
    from: broker,
    meaning: 'The remote returned a complete, authoritative refusal that claims no success.',
  },
  ATTESTED_REJECTED: {
    from: broker,
    meaning:
      "A person attested that the remote refused an action whose outcome was unknown: no answer from the remote says so (the person's basis is in the action's record).",
  },
  REMOTE_AUTH_REJECTED: {
    from: broker,
    meaning: 'The remote rejected the injected credential (HTTP 401); never retried with it.',
  },
  REMOTE_THROTTLED: {
    from: broker,
    meaning: 'The remote asked the broker to slow down (429/503); retry only by backoff where safe.',
  },
  REMOTE_ERROR_STATUS: {
    from: broker,
    meaning: 'The remote returned a complete error result (5xx); it may have changed state.',
  },
  COMMAND_FAILED: { from: broker, meaning: 'The remote command completed with a non-zero exit status or a signal.' },
  MCP_TOOL_FAILED: {
    from: broker,
    meaning:
      'The upstream MCP tool ran and answered with a result marked isError; like a non-zero exit status, it may have changed state.',
  },
  REDIRECT_BLOCKED: {
    from: broker,
    meaning: 'The remote redirected to a destination the route does not allow; it was not followed.',
  },
  REDIRECT_NOT_FOLLOWED: {
    from: broker,
    meaning:
      "The remote answered a redirect (300, 301, 302, 307 or 308) within the route's own origin: the request was not carried out where it was sent, and Postern follows no redirect. Send it to the Location if that is what was meant.",
  },
  // result_delivery
  RESULT_DELIVERY_FAILED: {
    from: broker,
    meaning: 'The result is recorded but could not be handed to the caller; fetch it.',
  },
  RESULT_NOT_READY: {
    from: broker,
    meaning:
      'fetch_result found no recorded outcome yet: the action still waits (not_attempted so far) or is in flight (unknown until recorded); wait with action_status wait_ms, then fetch again. The read sent nothing.',
  },
  RESULT_EXPIRED: {
    from: broker,
    meaning: 'The stored result passed its retention; it is never re-executed to recreate it.',
  },
  RESULT_NOT_STORED: {
    from: broker,
    meaning:
      "fetch_result found the action's outcome recorded but no stored result to hand over (a person's attestation or a reconciliation lookup settled it, so no response was recorded; or the stored one cannot be read); the envelope says what is known. The read sent nothing; the action is never re-executed.",
  },
  // SSH session recordings (docs/ssh-channel.md)
  RECORDING_UNAVAILABLE: {
    from: broker,
    meaning: 'The SSH session recording could not be started, so the command was not run (nothing runs unrecorded).',
  },
  RECORDING_INCOMPLETE: {
    from: broker,
    meaning: 'The SSH session recording was started but never completed (a crash or a store failure after exec).',
  },
  RECORDING_IN_PROGRESS: {
    from: broker,
    meaning:
      'The SSH session recording is still open because its action is in flight (its command being set up or running); it is sealed when the command ends: read it again once the action settles.',
  },
  RECORDING_STATE_UNKNOWN: {
    from: broker,
    meaning:
      'The SSH session recording is open, and this reader of the journal file is not the broker holding its data directory: it cannot tell a command still running (RECORDING_IN_PROGRESS) from one whose broker died (RECORDING_INCOMPLETE). Ask the running broker (`postern actions recording`).',
  },
  // queue and retry engine
  LANE_BLOCKED: { from: broker, meaning: 'An older action in the same lane has an unknown outcome; this one waits.' },
  DECISION_CONFLICT: {
    from: broker,
    meaning:
      'The ticket (or credential request) already holds a terminal decision or was dispatched; the late decision changed nothing.',
  },
  ACTION_CLOSED: {
    from: broker,
    meaning:
      'The action is already closed (settled, closed before dispatch, abandoned, or its outcome recorded with no attempt in flight): the cancel had no effect and recorded nothing.',
  },
  NOT_FOUND: {
    from: ['broker', 'operator_host'],
    meaning:
      'Nothing by that name is visible to this caller: no action, ticket, session or credential request with that id, no operator API method or file at that path.',
  },
  // agent interface: the local socket (broker/agent)
  UNKNOWN_TOOL: { from: broker, meaning: 'The MCP tool name is not one Postern offers; list the tools first.' },
  OPERATOR_ONLY: {
    from: broker,
    meaning: 'Approving, rejecting, abandoning and revoking are operator capabilities; agents can never call them.',
  },
  EXECUTABLE_UNVERIFIABLE: {
    from: broker,
    meaning:
      'The broker could not hash the executable (the process is gone or runs another program now, or the file is unreadable or not a regular file); no allowlist entry was added.',
  },
  PEER_REFUSED: {
    from: broker,
    meaning: 'The connecting process runs as another user or its identity could not be read from the kernel.',
  },
  RATE_LIMITED: {
    from: broker,
    meaning:
      'Too many connections or calls in flight for this user or session, or requests queued in `postern mcp` while the broker is away; nothing was accepted, retry later.',
  },
  CONNECTION_EVICTED: {
    from: broker,
    meaning:
      'An idle agent connection was closed to make room for another at the per-user cap; it had no call in progress, so nothing was lost: reconnect.',
  },
  CONTROL_SOCKET_BUSY: {
    from: broker,
    meaning:
      'The control socket closed the connection before reading a request on it: at its connection cap it closes the least recently active idle connection to make room, and refuses a newcomer when every connection has a request in progress or a reply still being written (a connection whose request it read is never told this). Nothing was read or done; the CLI sends such a request again a few times before it answers this.',
  },
  OPERATOR_PROOF_REQUIRED: {
    from: broker,
    meaning:
      "A decision came without a person's proof. On the control socket: run it in a terminal (it asks for the vault passphrase), or decide in the desktop window or the operator UI. In the operator UI (field passphrase): this tab has not presented the vault passphrase in this run (the sign-in code alone proves no person); the page asks for it (Confirm it is you, or POST /auth/prove). proof_refusal passphrase_from_file: the broker's passphrase was read from a file in this run (any process of the user can read it), so no passphrase proves a person on any surface: start it without the file. proof_refusal no_vault (operator UI): no vault yet; create it first.",
  },
  PASSPHRASE_BACKOFF: {
    from: broker,
    meaning:
      'Too many wrong vault passphrases from this user (or one is being checked); nothing was checked now, retry after retry_after_ms.',
  },
  LEASE_LOST: {
    from: broker,
    meaning:
      "Another worker holds this invocation's retry lease, or this worker's lease expired; it was stopped before dispatch.",
  },
  RETRY_BUDGET_EXHAUSTED: {
    from: broker,
    meaning: 'The recorded retry budget is spent; the last evidence stands, reconcile next.',
  },
  // broker integrity
  BROKER_RESTARTED: {
    from: broker,
    meaning: 'The broker restarted while the action was in flight; the record says how far it got.',
  },
  DEBUGGER_OPEN: {
    from: broker,
    meaning:
      "Node's inspector was open in this Postern process (started with --inspect, or opened by a signal before Postern refused it); the process closed it and refused to start, take a secret or keep running.",
  },
  BROKER_ALREADY_RUNNING: {
    from: broker,
    meaning: "Another broker holds this data directory's lock (a stopped one too); this one started nothing.",
  },
  CONTROL_SOCKET_UNVERIFIED: {
    from: broker,
    meaning:
      "The process listening on the control socket is not the broker holding the data directory's lock (another process may have put its own socket there); the CLI sent nothing.",
  },
  JOURNAL_UNAVAILABLE: {
    from: broker,
    meaning: 'The journal could not make a record durable; the broker stopped dispatching.',
  },
  JOURNAL_NOT_DURABLE: {
    from: broker,
    meaning: 'The journal database refused the durability settings the broker requires.',
  },
  IMPOSSIBLE_TRANSITION: {
    from: broker,
    meaning: 'An event would contradict the recorded history (for example not_attempted after dispatch).',
  },
  JOURNAL_QUARANTINED: {
    from: broker,
    meaning:
      'The start found the journal disagreeing with its signed integrity anchor (rolled back, forged, history missing); every action tool is refused until a person re-adopts the journal (`postern integrity readopt`).',
  },
  ANCHOR_ROLLBACK: {
    from: broker,
    meaning:
      'Quarantine: the integrity anchor is ahead of the journal (the journal or the whole data directory was restored to an earlier copy), or the anchor is older than the journal recorded.',
  },
  ANCHOR_FORGED: {
    from: broker,
    meaning:
      "Quarantine: the integrity anchor is unreadable, names another data directory, or its signature does not verify under the journal's audit key.",
  },
  ANCHOR_TAIL_MISSING: {
    from: broker,
    meaning:
      'Quarantine: the journal recorded the anchor but lacks the events it names, or its tree head at that position differs (history rewritten).',
  },
  ANCHOR_MISSING: {
    from: broker,
    meaning:
      'Quarantine: the journal recorded writing an integrity anchor, but no anchor file exists for this data directory (deleted, or the data directory moved).',
  },
  ANCHOR_STATE_MISMATCH: {
    from: broker,
    meaning: "Quarantine: the journal's audit key ring differs from the one the integrity anchor was signed over.",
  },
  MIGRATION_FAILED: {
    from: broker,
    meaning: 'A journal schema migration failed; the database was left at its previous version.',
  },
  AUDIT_KEY_UNAVAILABLE: {
    from: broker,
    meaning:
      'The key that encrypted these journal events is not available now (vault locked, or the run ended before any audit key existed).',
  },
  AUDIT_KEY_MISMATCH: {
    from: broker,
    meaning:
      "The journal's checkpoint public key (audit_keys, plaintext) is not the public half of the audit signing key the vault holds: the key table was rewritten; the checkpoint export wrote nothing.",
  },
  AUDIT_VERIFY_FAILED: {
    from: broker,
    meaning:
      "The journal fails verification under the vault's checkpoint key (the message names the verify code and first bad position); the checkpoint export wrote nothing.",
  },
  INTERNAL: {
    from: ['broker', 'operator_host'],
    meaning:
      'A broker bug (the daemon log has it); for an action, the record keeps what is known and it is treated as unknown if dispatched.',
  },
  // operator HTTP host: refused before a handler (docs/operator.md)
  UNAUTHENTICATED: {
    from: ['operator_host', 'desktop'],
    meaning:
      'The caller did not prove it is the operator UI: no valid session secret (Authorization: Bearer) or sign-in token on the HTTP host ' +
      '(open the URL the daemon printed and type the code printed beside it), or an IPC call from a page that is not the Postern UI.',
  },
  SIGN_IN_USED: {
    from: host,
    meaning:
      'The printed sign-in URL was already exchanged for a session; it works once. The daemon printed the next one on its terminal.',
  },
  SIGN_IN_CODE_WRONG: {
    from: host,
    meaning:
      'The sign-in URL was right but the code typed with it was not the one printed beside it; the URL takes 3 wrong codes. If you ' +
      'did not mistype, a program read the link from a command line.',
  },
  SIGN_IN_CODE_SPENT: {
    from: host,
    meaning:
      'The third wrong code for this sign-in URL spent it; the daemon printed a new URL and code on its terminal. If you did not ' +
      'mistype, a program read the link and guessed.',
  },
  MALFORMED_PATH: { from: host, meaning: 'The request target is not a path this host can parse.' },
  HOST_NOT_ALLOWED: {
    from: host,
    meaning: 'The Host header is not 127.0.0.1:PORT or localhost:PORT (DNS-rebinding defence).',
  },
  CROSS_SITE_REFUSED: {
    from: host,
    meaning:
      'A state-changing call that is not JSON from this very origin (a page on another local port is the same site).',
  },
  METHOD_NOT_ALLOWED: { from: host, meaning: 'This path does not accept the HTTP method used.' },
  EVENT_STREAMS_LIMIT: {
    from: host,
    meaning: 'GET /api/events already has as many streams open as the host allows (each tab holds one).',
  },
  RENDERER_NOT_BUILT: { from: host, meaning: 'The operator UI bundle is missing; run `npm run build:renderer`.' },
  // desktop shell: refused by main before the broker (docs/desktop.md)
  SHUTTING_DOWN: {
    from: ['broker', 'desktop'],
    meaning: 'Postern is shutting down; nothing new is accepted (calls already running finish within the drain).',
  },
  NOT_CONFIRMED: {
    from: desktop,
    meaning: 'The decision was not confirmed in the Postern dialog; nothing was decided.',
  },
  // postern audit verify (docs/audit.md; `seq` in a failure is the first append position the code is about, or null)
  DB_UNREADABLE: { from: verify, meaning: 'The file is not a readable SQLite database (or is not a Postern journal).' },
  SCHEMA_UNSUPPORTED: {
    from: verify,
    meaning: 'The journal schema is older than the audit log (4) or newer than this verifier knows.',
  },
  CHECKPOINT_FILE_INVALID: {
    from: verify,
    meaning: 'The --checkpoint file is missing, too large, or not a Postern checkpoint.',
  },
  KEY_MISMATCH: {
    from: verify,
    meaning:
      "The journal's checkpoint public key differs from the trusted key: the --checkpoint file's, or with --check-key the vault's audit signing key.",
  },
  ROW_MALFORMED: {
    from: verify,
    meaning: 'A row has a cell of the wrong type or size (hostile or damaged input); seq is that row.',
  },
  ROW_MISSING: {
    from: verify,
    meaning: 'An append position is absent: a row was deleted (or the log starts late); seq is the first gap.',
  },
  ROW_MODIFIED: {
    from: verify,
    meaning: "A row's bytes no longer hash to its leaf: header, nonce, ciphertext or leaf changed, or rows swapped.",
  },
  CHAIN_BROKEN: {
    from: verify,
    meaning: 'The stored tree head does not match the rows (rows appended or rewritten outside the journal).',
  },
  SIGNATURE_INVALID: {
    from: verify,
    meaning: 'A checkpoint signature does not verify under the checkpoint public key; seq is its size.',
  },
  FORKED: {
    from: verify,
    meaning: 'The rows up to a signed checkpoint hash to a different root: history was rewritten after signing.',
  },
  TRUNCATED: {
    from: verify,
    meaning: 'The log ends before a position that was recorded (tree head or checkpoint); seq is the first lost one.',
  },
  ROLLED_BACK: {
    from: verify,
    meaning: 'The log is consistent but older than the trusted checkpoint: the file was replaced by an earlier copy.',
  },
  // clients: no answer came back from the broker
  BROKER_UNREACHABLE: {
    from: operatorUi,
    meaning: 'The request did not reach the broker (daemon stopped, network error).',
  },
  BAD_REPLY: { from: operatorUi, meaning: 'The broker answered, but not with a Reply this UI understands.' },
  SIGN_IN_URL_INVALID: {
    from: operatorUi,
    meaning:
      "What was pasted to sign a tab in is neither a sign-in URL of this broker's operator host nor the token in one.",
  },
  SIGN_IN_CODE_INVALID: {
    from: operatorUi,
    meaning:
      'What was typed as the sign-in code is not 8 digits; the daemon prints it beside each sign-in URL (`Sign-in code: 1234-5678`). Nothing was sent.',
  },
  BROKER_NOT_RUNNING: {
    from: sdk,
    meaning: 'No Postern broker is listening on the socket; start one with `postern daemon --data-dir DIR`.',
  },
  CONNECTION_FAILED: {
    from: ['broker', 'sdk'],
    meaning:
      'The socket accepted the connection but no MCP session could be opened on it (`postern mcp`: its reconnections were accepted but never answered within --reconnect-for).',
  },
  PROTOCOL: { from: sdk, meaning: 'The broker answered with a shape this SDK does not understand.' },
  ROUTES_CHANGED: {
    from: sdk,
    meaning:
      "listRoutes read list_routes' pages and the config was reloaded between two of them, each time it started over.",
  },
  CONNECTION_LOST: {
    from: sdk,
    meaning:
      'The connection to the broker closed before it answered; the error names the action the call recorded, if the broker had named one.',
  },
} as const satisfies Readonly<Record<string, CodeEntry>>;

export type PosternCode = keyof typeof errorCodeRegistry;

/** The codes one surface answers with: a picked subset of the one registry, never a registry of its own. */
export type CodesFrom<S extends CodeSource> = {
  [K in PosternCode]: S extends (typeof errorCodeRegistry)[K]['from'][number] ? K : never;
}[PosternCode];

/** The broker's codes: what a CodedError, an envelope or a broker Reply carries. */
export type ErrorCode = CodesFrom<'broker'>;
export type HostErrorCode = CodesFrom<'operator_host'>;
export type DesktopRefusalCode = CodesFrom<'desktop'>;
export type OperatorUiErrorCode = CodesFrom<'operator_ui'>;

/** The meanings of the codes one surface answers with, in registry order. */
export function meaningsFrom<S extends CodeSource>(source: S): { readonly [K in CodesFrom<S>]: string } {
  const entries: [string, CodeEntry][] = Object.entries(errorCodeRegistry);
  return Object.fromEntries(
    entries.filter(([, entry]) => entry.from.includes(source)).map(([code, entry]) => [code, entry.meaning]),
  ) as {
    readonly [K in CodesFrom<S>]: string;
  };
}

export const errorCodeMeanings = meaningsFrom('broker');

export const ErrorCode = Object.fromEntries(Object.keys(errorCodeMeanings).map((code) => [code, code])) as {
  readonly [K in ErrorCode]: K;
} satisfies ClosedSet<ErrorCode>;

/**
 * The HTTP status the operator host answers with when it refuses with a code itself (http-host.ts
 * `sendError`). A broker Reply relayed by the host keeps its own mapping (`replyErrorStatus`).
 */
export const hostHttpStatus = {
  INVALID_ARGUMENT: 400,
  PAYLOAD_LIMIT: 413,
  NOT_FOUND: 404,
  INTERNAL: 500,
  UNAUTHENTICATED: 401,
  SIGN_IN_USED: 401,
  SIGN_IN_CODE_WRONG: 401,
  SIGN_IN_CODE_SPENT: 401,
  MALFORMED_PATH: 400,
  HOST_NOT_ALLOWED: 421,
  CROSS_SITE_REFUSED: 403,
  METHOD_NOT_ALLOWED: 405,
  EVENT_STREAMS_LIMIT: 503,
  RENDERER_NOT_BUILT: 503,
} as const satisfies { readonly [K in HostErrorCode]: number };
