import type { JsonRpcId } from './jsonrpc-error.js';

/**
 * The JSON-RPC id of a message the socket will not parse whole (an oversized line), read from its edges
 * so the refusal can answer the request it belongs to. Clients order members differently: the Python SDK
 * writes `{"jsonrpc","id","method",…}` (the id near the start), the TypeScript SDK `{"method","params",
 * "jsonrpc","id"}` (the id last). Both edges are at most a few KiB, so these scans are bounded; a wrong
 * guess can only mislabel the sender's own request, and no guess (null) is always allowed.
 */
export const frameEdgeBytes = 1024;

const objectStart = /^\s*\{/y;
// One simple member: a string key and a scalar value, then `,` or `}`. Strings are linear to match (no
// overlapping alternatives); an object or array value ends the scan, since its end is not within reach.
const simpleMember =
  /\s*("(?:[^"\\]|\\.)*")\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)\s*([,}])/y;
// `,"id":<scalar>}` at the very end: a bare `"` never occurs inside a JSON string, and a single closing brace
// at the end of a valid message closes the top-level object, so this member is the message's own id.
const trailingIdMember = /[,{]\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*\}\s*$/;

/** The id among the leading scalar members of `{…`, if one is there before the first nested value. */
export function leadingFrameId(head: Buffer): JsonRpcId | undefined {
  const text = head.subarray(0, frameEdgeBytes).toString('utf8');
  objectStart.lastIndex = 0;
  if (!objectStart.test(text)) return undefined;
  simpleMember.lastIndex = objectStart.lastIndex;
  for (let match = simpleMember.exec(text); match !== null; match = simpleMember.exec(text)) {
    const [, key, value, end] = match;
    if (parseJson(key) === 'id') return validId(parseJson(value));
    if (end === '}') return undefined;
  }
  return undefined;
}

/** The id of a message that ends with `"id":<scalar>}` (its last bytes, at most frameEdgeBytes). */
export function trailingFrameId(tail: Buffer): JsonRpcId | undefined {
  const text = tail.subarray(Math.max(0, tail.length - frameEdgeBytes)).toString('utf8');
  const match = trailingIdMember.exec(text);
  return match === null ? undefined : validId(parseJson(match[1]));
}

/** Only what JSON-RPC allows as an id (and what the SDK can match): a string or a safe integer. */
function validId(value: unknown): JsonRpcId | undefined {
  return typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value)) ? value : undefined;
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
