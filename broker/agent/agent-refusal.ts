import type { AgentRefusal, ErrorCode } from '../contract/index.js';
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
  const structured: AgentRefusal = {
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
  return { isError: true, structured, text: `${code}: ${message}` };
}
