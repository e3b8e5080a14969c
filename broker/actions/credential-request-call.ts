import { callWaitMsDefault, credentialRequestInputSchema, type CredentialRequestReply } from '../contract/index.js';
import type { ToolAnswer } from '../ports/index.js';
import type { AgentBackendDeps } from './agent-backend-deps.js';
import { closedSessionRefusal, refusal } from './agent-answers.js';
import { agentParse, issueField, issueMessage } from './http-action-request.js';

/**
 * request_credential: records a new request (or takes up an earlier one of this session by `request_id`) and waits
 * for a person's answer up to the caller's wait. The answer names the credential, never its value; `pending` when the
 * wait ended first (the request keeps waiting for a person until it expires).
 */
export async function credentialRequestCall(
  deps: AgentBackendDeps,
  sessionId: string,
  args: unknown,
  signal: AbortSignal,
): Promise<ToolAnswer> {
  const requests = deps.credentialRequests;
  if (requests === undefined) return refusal('UNSUPPORTED_ACTION', 'this broker takes no credential requests', 'never');
  const session = deps.journal.getSession(sessionId);
  if (session === undefined) return refusal('NOT_FOUND', 'no such session', 'never');
  const closed = closedSessionRefusal(session, 'nothing was accepted', () =>
    deps.journal.sessionRecordCheck(sessionId),
  );
  if (closed !== undefined) return refusal(closed.code, closed.message, 'never');
  const parsed = credentialRequestInputSchema.safeParse(args, agentParse);
  if (!parsed.success) {
    // The message names the field and the rule, never the value (it may be anything the agent wrote).
    const issue = parsed.error.issues[0];
    return refusal('INVALID_ARGUMENT', issueMessage(issue), 'after_correction', issueField(issue));
  }
  const input = parsed.data;
  const requestId = input.request_id ?? (await requests.request(sessionId, input)).request_id;
  const reply = await requests.wait(
    sessionId,
    requestId,
    input.timeout_ms ?? deps.config.agents.wait_ms_default ?? callWaitMsDefault,
    signal,
  );
  return {
    isError: reply.status === 'declined' || reply.status === 'expired',
    structured: reply,
    text: headline(reply),
  };
}

function headline(reply: CredentialRequestReply): string {
  switch (reply.status) {
    case 'provisioned':
      return `credential request ${reply.request_id} provisioned: use the credential ${reply.credential ?? '(unnamed)'}`;
    case 'declined':
      return `credential request ${reply.request_id} declined${reply.reason === undefined ? '' : `: ${reply.reason}`}`;
    case 'expired':
      return `credential request ${reply.request_id} expired without an answer`;
    case 'pending':
      return `credential request ${reply.request_id} is waiting for a person; call request_credential again with request_id`;
  }
}
