import { agentRefusal, isAgentReadTool, type AgentRefusal, type ErrorCode } from '../contract/index.js';
import type { ToolAnswer } from '../ports/index.js';

/**
 * What a refusal of a call to tool `name` may say about an outcome: `not_attempted` for an action call (or an unknown
 * name) refused before it reached the backend — nothing was admitted, nothing sent; none for a read (action_status,
 * fetch_result, cancel_action, list_routes): that refusal says nothing about any action.
 */
export function refusalOutcome(name: string): 'not_attempted' | null {
  return isAgentReadTool(name) ? null : 'not_attempted';
}

/**
 * A tool answer that belongs to no action: the socket's own refusals (unknown tool, operator-only,
 * in-flight limit, a refused session, a backend bug). Same error shape as an envelope's; `outcome` as
 * refusalOutcome says, or null where none may be claimed.
 */
export function refusalAnswer(
  code: ErrorCode,
  message: string,
  retry: AgentRefusal['error']['retry'],
  outcome: 'not_attempted' | null,
  field?: string,
): ToolAnswer {
  const structured = agentRefusal(code, message, retry, field, outcome);
  return { isError: true, structured, text: `${code}: ${message}` };
}
