import { z } from 'zod';
import {
  agentRefusalSchema,
  agentRouteListSchema,
  agentToolDescriptions,
  agentToolInputSchemas,
  agentToolNames,
  agentToolReplySchema,
  credentialRequestReplySchema,
  type AgentToolName,
} from '../contract/index.js';
import type { UpstreamToolListing } from '../ports/index.js';

type ObjectJsonSchema = { type: 'object'; [key: string]: unknown };

/** One entry of tools/list. */
export interface ListedTool {
  readonly name: AgentToolName;
  readonly description: string;
  readonly inputSchema: ObjectJsonSchema;
  readonly outputSchema: ObjectJsonSchema;
}

/**
 * What each tool's structuredContent is, as zod checks it before an answer is sent: an action's envelope
 * (or a refusal) for the five action and read tools, the route list (or a refusal) for list_routes. The
 * socket itself refuses any tool call (rate limit, unknown session, a backend bug), hence the refusal in each.
 */
export const agentToolReplySchemas: { readonly [K in AgentToolName]: z.ZodType } = {
  http_request: agentToolReplySchema,
  ssh_exec: agentToolReplySchema,
  action_status: agentToolReplySchema,
  fetch_result: agentToolReplySchema,
  cancel_action: agentToolReplySchema,
  list_routes: z.union([agentRouteListSchema, agentRefusalSchema]),
  request_credential: z.union([credentialRequestReplySchema, agentRefusalSchema]),
};

/**
 * The seven tools as MCP lists them, derived once from the contract's zod schemas. The input schemas are
 * published for the agent's benefit only: the server never validates arguments against them (the
 * backend does, and journals an invalid action call), so bad arguments are answers, not protocol
 * errors. The output schemas are what clients validate structuredContent against (the MCP SDK
 * client does, for every answer), and every answer is checked against the same zod schema first.
 */
export const listedTools: readonly ListedTool[] = agentToolNames.map((name) => {
  const inputSchema = z.toJSONSchema(agentToolInputSchemas[name]) as Record<string, unknown>;
  if (inputSchema['type'] !== 'object') throw new Error(`the ${name} input schema must be a JSON object schema`);
  return {
    name,
    description: agentToolDescriptions[name],
    inputSchema: inputSchema as ObjectJsonSchema,
    outputSchema: outputJsonSchema(name),
  };
});

/**
 * MCP requires an output schema whose top level is `type: object`; a union's JSON Schema is a bare `anyOf`
 * of object schemas, so the type is stated beside it (every branch is an object, so it changes nothing).
 */
function outputJsonSchema(name: AgentToolName): ObjectJsonSchema {
  const schema = z.toJSONSchema(agentToolReplySchemas[name]) as Record<string, unknown>;
  const branches = schema['anyOf'];
  if (schema['type'] === 'object') return schema as ObjectJsonSchema;
  if (!Array.isArray(branches) || !branches.every((b) => (b as Record<string, unknown>)['type'] === 'object')) {
    throw new Error(`the ${name} reply schema must be a JSON object schema or a union of them`);
  }
  return { ...schema, type: 'object' };
}

const upstreamOutputSchema = outputJsonSchema('http_request');

/**
 * An upstream MCP tool as Postern lists it: the upstream's name (`<server>.<tool>`), description and input schema,
 * and Postern's own output schema — the answer is an action's envelope carrying the upstream's reply, like
 * http_request's.
 */
export function upstreamListedTool(listing: UpstreamToolListing): Omit<ListedTool, 'name'> & { name: string } {
  return {
    name: listing.name,
    description: listing.description ?? '',
    inputSchema: { ...listing.inputSchema, type: 'object' },
    outputSchema: upstreamOutputSchema,
  };
}
/** An upstream tool's agent-visible name has a dot (`<server>.<tool>`); Postern's own tools never do. */
export function isUpstreamToolName(name: string): boolean {
  return /^[a-z][a-z0-9_-]{0,31}\.[A-Za-z0-9_-]{1,64}$/.test(name);
}

const toolNameSet: ReadonlySet<string> = new Set<string>(agentToolNames);

export function isAgentToolName(name: string): name is AgentToolName {
  return toolNameSet.has(name);
}
