import type { ErrorCode } from '../contract/index.js';

/** JSON-RPC 2.0 error codes the socket uses (the spec's, plus -32000 for Postern's own refusals). */
export const jsonRpcCode = {
  parseError: -32_700,
  invalidRequest: -32_600,
  methodNotFound: -32_601,
  /** Postern refused the connection itself (peer identity, connection limit). */
  refused: -32_000,
} as const;

export type JsonRpcId = string | number | null;

/** One error line as written on the socket; `data.code` is a Postern error code where there is one. */
export function jsonRpcErrorLine(id: JsonRpcId, code: number, message: string, postern?: ErrorCode): string {
  const error = { code, message, ...(postern === undefined ? {} : { data: { code: postern } }) };
  return `${JSON.stringify({ jsonrpc: '2.0', id, error })}\n`;
}

/**
 * An Error the MCP SDK turns into a JSON-RPC error response: it copies `code`, `message` and `data`
 * (McpError would prefix the message with "MCP error N:").
 */
export function jsonRpcError(
  code: number,
  message: string,
  postern?: ErrorCode,
): Error & { code: number; data?: { code: ErrorCode } } {
  return Object.assign(new Error(message), { code, ...(postern === undefined ? {} : { data: { code: postern } }) });
}
