import type { ClosedSet } from './closed-set.js';

/**
 * Every stable machine code Postern returns, each with a one-line meaning. Codes never change
 * meaning; new ones may be added. docs/error-codes.md lists the same set (a test compares them).
 */
export const errorCodeMeanings = {
  // validation: refused before a secret is touched or a host resolved
  INVALID_ARGUMENT: 'A required field is missing or malformed; the field path says which.',
  INVALID_TARGET: 'The target (route, path, host entry) is malformed, unknown or escapes its base.',
  UNSUPPORTED_ACTION: 'The action or method is not supported for this target.',
  PAYLOAD_LIMIT: 'A body, header, URL or command exceeds its configured size limit.',
  FORBIDDEN_HEADER: 'The agent set a header the broker owns (Authorization, Host, Cookie, Proxy-*, the injected header).',
  UNKNOWN_CREDENTIAL: 'The referenced credential does not exist; its name is never echoed.',
  FINGERPRINT_MISMATCH: 'The request no longer matches the fingerprint that was approved; nothing was sent.',
  IDEMPOTENCY_MISMATCH: 'An idempotency key was reused with a different request fingerprint; nothing was sent.',
  CONFIG_INVALID: 'The configuration file is malformed or breaks a rule; the field path says which.',
  CONFIG_UNTRUSTED: 'The accepted configuration failed its integrity check; every route and host is refused until a person accepts a configuration again.',
  CONFIG_PENDING: 'postern.yaml holds a change no person has accepted; a person reviews and accepts it (Routes & hosts, operator method config.accept) first.',
  // credential_injection: local gates before dispatch
  VAULT_LOCKED: 'The vault is locked; retry after it is unlocked.',
  CREDENTIAL_MISSING: 'The credential exists in configuration but has no usable secret; correct it first.',
  // vault: the encrypted credential store (broker/vault)
  VAULT_NOT_INITIALIZED: 'The vault has not been created yet; run `postern vault init` first.',
  VAULT_ALREADY_INITIALIZED: 'The vault already exists; it is never re-created over an existing one.',
  VAULT_PASSPHRASE_INVALID: 'The vault passphrase is wrong; nothing was unlocked or changed.',
  VAULT_CORRUPT: 'The vault file is damaged, newer than this Postern, or a sealed value failed its integrity check; nothing was decrypted.',
  VAULT_KEY_PROTECTED: "The vault key is also sealed by the desktop app's OS keyring (safeStorage); only the Postern desktop app, on the machine and login that protected it, can unlock it.",
  VAULT_KEY_PROTECTOR_FAILED: 'The OS keyring protecting the vault key refused or failed (locked, another login or machine, or a damaged blob); nothing was unlocked or changed.',
  CREDENTIAL_EXISTS: 'A credential with this name already exists; rotate it or remove it first.',
  APPROVAL_DENIED: 'A person rejected this invocation; it will never be sent.',
  APPROVAL_EXPIRED: 'The approval window closed before a decision; nothing was sent.',
  SESSION_REVOKED: 'The agent session was revoked or ended before dispatch; nothing was sent.',
  CALLER_CANCELLED: 'The caller cancelled; before dispatch nothing was sent, after dispatch the effect is unknown.',
  CALLER_DEADLINE_EXCEEDED: 'The caller stopped waiting; before dispatch nothing was sent, after dispatch the effect is unknown.',
  // connection_setup: a fresh connection failed before the application channel existed
  DNS_FAILED: 'The target host name could not be resolved; nothing was sent.',
  CONNECT_REFUSED: 'The TCP connection was refused; nothing was sent.',
  CONNECT_TIMEOUT: 'The TCP connection was not established in time; nothing was sent.',
  NETWORK_UNREACHABLE: 'No route to the target network; nothing was sent.',
  TLS_FAILED: 'The TLS handshake or certificate verification failed; nothing was sent.',
  PROXY_FAILED: 'The proxy tunnel could not be opened; nothing was sent.',
  SSH_TRANSPORT_FAILED: 'SSH key exchange or transport negotiation failed; nothing was sent.',
  SSH_HOST_KEY_REJECTED: "The SSH server's host key did not match the pinned or stored key; nothing was sent.",
  SSH_AUTH_FAILED: 'The SSH server rejected the user key; nothing was sent.',
  SSH_CHANNEL_FAILED: 'The SSH session channel could not be opened; nothing was sent.',
  // remote_execution: dispatched; what the remote said (or did not)
  REMOTE_OUTCOME_UNKNOWN: 'Dispatch may have reached the remote and no deciding result was recorded.',
  OPERATION_TIMEOUT: "The route's or SSH host's operation deadline (timeout_ms in postern.yaml) passed before a complete result; a broker-side limit, not a caller event.",
  REMOTE_RESULT_INCOMPLETE: 'The remote ended without a complete result (partial body, no exit status).',
  REMOTE_REJECTED: 'The remote returned a complete, authoritative refusal that claims no success.',
  REMOTE_AUTH_REJECTED: 'The remote rejected the injected credential (HTTP 401); never retried with it.',
  REMOTE_THROTTLED: 'The remote asked the broker to slow down (429/503); retry only by backoff where safe.',
  REMOTE_ERROR_STATUS: 'The remote returned a complete error result (5xx); it may have changed state.',
  COMMAND_FAILED: 'The remote command completed with a non-zero exit status or a signal.',
  REDIRECT_BLOCKED: 'The remote redirected to a destination the route does not allow; it was not followed.',
  // result_delivery
  RESULT_DELIVERY_FAILED: 'The result is recorded but could not be handed to the caller; fetch it.',
  RESULT_EXPIRED: 'The stored result passed its retention; it is never re-executed to recreate it.',
  // queue and retry engine
  LANE_BLOCKED: 'An older action in the same lane has an unknown outcome; this one waits.',
  DECISION_CONFLICT: 'The ticket already holds a terminal decision or was dispatched; the late decision changed nothing.',
  NOT_FOUND: 'No action, ticket or session with that id is visible to this caller.',
  // agent interface: the local socket (broker/agent)
  UNKNOWN_TOOL: 'The MCP tool name is not one Postern offers; list the tools first.',
  OPERATOR_ONLY: 'Approving, rejecting, abandoning and revoking are operator capabilities; agents can never call them.',
  PEER_REFUSED: 'The connecting process runs as another user or its identity could not be read from the kernel.',
  RATE_LIMITED: 'Too many connections or calls in flight for this user or session; nothing was accepted, retry later.',
  OPERATOR_PROOF_REQUIRED: "A decision reached the control socket without a person's proof: run it in a terminal (it asks for the vault passphrase), or decide in the desktop window or the operator UI.",
  PASSPHRASE_BACKOFF: 'Too many wrong vault passphrases from this user (or one is being checked); nothing was checked now, retry after retry_after_ms.',
  LEASE_LOST: "Another worker holds this invocation's retry lease, or this worker's lease expired; it was stopped before dispatch.",
  RETRY_BUDGET_EXHAUSTED: 'The recorded retry budget is spent; the last evidence stands, reconcile next.',
  // broker integrity
  BROKER_RESTARTED: 'The broker restarted while the action was in flight; the record says how far it got.',
  BROKER_ALREADY_RUNNING: "Another broker holds this data directory's lock (a stopped one too); this one started nothing.",
  JOURNAL_UNAVAILABLE: 'The journal could not make a record durable; the broker stopped dispatching.',
  JOURNAL_NOT_DURABLE: 'The journal database refused the durability settings the broker requires.',
  IMPOSSIBLE_TRANSITION: 'An event would contradict the recorded history (for example not_attempted after dispatch).',
  MIGRATION_FAILED: 'A journal schema migration failed; the database was left at its previous version.',
  AUDIT_KEY_UNAVAILABLE: 'The key that encrypted these journal events is not available now (vault locked, or the run ended before any audit key existed).',
  INTERNAL: 'A broker bug; the record keeps what is known and the action is treated as unknown if dispatched.',
} as const;

export type ErrorCode = keyof typeof errorCodeMeanings;

export const ErrorCode = Object.fromEntries(
  Object.keys(errorCodeMeanings).map((code) => [code, code]),
) as { readonly [K in ErrorCode]: K } satisfies ClosedSet<ErrorCode>;
