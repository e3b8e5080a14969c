import { brokerApiMethods } from '../contract/index.js';

/**
 * Names that belong to the operator surface. An agent that asks for one (as an MCP tool name or as a
 * JSON-RPC method) gets OPERATOR_ONLY instead of "unknown", so a confused or probing agent learns
 * that the capability exists and is never its to use. The contract's operator API list is the
 * source; the explicit words below cover the approval verbs under the spellings agents tend to
 * try (approve, approvals.approve, approve_action…), whether or not the operator API has them yet.
 */
export const operatorWordStems = [
  'approv',
  'reject',
  'abandon',
  'revok',
  'revoc',
  'attest',
  'reconcil',
  'unlock',
  'lock',
] as const;

const operatorMethodSet: ReadonlySet<string> = new Set<string>(brokerApiMethods);

/** Exactly an operator API method's name (`approvals.approve`): never an upstream tool, whatever its server. */
export function isOperatorMethod(name: string): boolean {
  return operatorMethodSet.has(name);
}

/**
 * True when `name` is an operator API method, or one of its words (split at . _ / - and spaces)
 * starts with an operator stem: approve, approvals.approve, approve_action, revoke-session,
 * vault.unlock. Agents' own verbs (cancel, status of an action) are not in the list.
 */
export function isOperatorName(name: string): boolean {
  if (operatorMethodSet.has(name)) return true;
  const words = name.toLowerCase().split(/[._/\-\s]+/);
  return words.some((word) => operatorWordStems.some((stem) => word.startsWith(stem)));
}
