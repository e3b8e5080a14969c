import { agentRefusal, type AgentRefusal, type ErrorCode } from '../contract/index.js';
import type { ToolAnswer } from '../ports/index.js';

/**
 * A tool answer that belongs to no action: the socket's own refusals (unknown tool, operator-only,
 * in-flight limit, a refused session, a backend bug). Same error shape as an envelope's.
 */
export function refusalAnswer(
  code: ErrorCode,
  message: string,
  retry: AgentRefusal['error']['retry'],
  field?: string,
): ToolAnswer {
  const structured = agentRefusal(code, message, retry, field);
  return { isError: true, structured, text: `${code}: ${message}` };
}
