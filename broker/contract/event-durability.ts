import type { EventKind } from './events.js';

/**
 * Whether the caller that appends an event waits for the disk (DESIGN.md §2's write-ahead rule) or only for the
 * commit. Every event is committed in order and becomes durable with the next fdatasync of the log, so an event
 * that does not wait rides in the next one that does (the log is a prefix on disk: nothing after a lost event
 * survives it). Waiting is needed where something outside the broker acts on the record: the first byte to a
 * remote (DISPATCH_STARTED), an answer that settles an action (RESULT_COMMITTED and every classification), and a
 * person's decision (answered to that person). Admission and the observations between dispatch and settlement do
 * not wait: losing them to a power cut leaves an action recovery classifies honestly (never dispatched, or unknown),
 * and an agent's answer naming an action waits on Journal.durable() before it leaves (agent-backend). Some of them
 * (the channels' observations, CREDENTIAL_AUTHORIZED, RESULT_DELIVERED) do not start a commit either:
 * Journal.appendLater holds them for the transaction of the next append that is not held.
 */
export const eventWaitsForDisk: Readonly<Record<EventKind, boolean>> = {
  ACTION_ACCEPTED: false,
  PREFLIGHT_VALIDATED: false,
  PREFLIGHT_FAILED: false,
  CARD_SHOWN: false,
  APPROVED: true,
  REJECTED: true,
  EXPIRED: true,
  CANCELLED: true,
  CREDENTIAL_AUTHORIZED: false,
  SETUP_ATTEMPT_FAILED: false,
  DISPATCH_STARTED: true,
  REQUEST_SENT: false,
  REMOTE_RESPONSE_STARTED: false,
  REMOTE_RESPONSE_COMPLETE: false,
  RESULT_COMMITTED: true,
  RESULT_DELIVERED: false,
  OPERATION_SUBMITTED: true,
  OUTCOME_RECORDED: true,
  CALLER_CANCELLED: false,
  CALLER_DEADLINE_EXCEEDED: false,
  CALLER_DISCONNECTED: false,
  CONNECTION_LOST: false,
  OUTPUT_RECEIVED: false,
  EXIT_STATUS: false,
  EXIT_SIGNAL: false,
  CHANNEL_CLOSED: false,
  RECONCILIATION_RESULT: true,
  OPERATOR_ATTESTED: true,
  RETRY_LEASED: true,
  ABANDONED: true,
  SESSION_STARTED: false,
  SESSION_APPROVED: true,
  SESSION_REVOKED: true,
  SESSION_ENDED: false,
  SESSION_RECONNECTED: false,
  CONFIG_APPLIED: true,
  // The agent is answered with the request's id (after Journal.durable()); the answers are a person's decisions.
  CREDENTIAL_REQUESTED: false,
  CREDENTIAL_PROVISIONED: true,
  CREDENTIAL_REQUEST_DECLINED: true,
  CREDENTIAL_REQUEST_EXPIRED: true,
  // A person's decisions, answered to that person.
  ALLOWLIST_ENTRY_ADDED: true,
  ALLOWLIST_ENTRY_REMOVED: true,
  INTEGRITY_READOPTED: true,
};
