import { z } from 'zod';
import { agentToolDescriptions, agentToolInputSchemas, agentToolNames, type AgentToolName } from '../contract/index.js';

/** One entry of tools/list. */
export interface ListedTool {
  readonly name: AgentToolName;
  readonly description: string;
  readonly inputSchema: { type: 'object'; [key: string]: unknown };
}

/**
 * The six tools as MCP lists them, derived once from the contract's zod schemas. The schemas are
 * published for the agent's benefit only: the server never validates arguments against them (the
 * backend does, and journals an invalid action call), so bad arguments are answers, not protocol
 * errors.
 */
export const listedTools: readonly ListedTool[] = agentToolNames.map((name) => {
  const schema = z.toJSONSchema(agentToolInputSchemas[name]) as Record<string, unknown>;
  if (schema['type'] !== 'object') throw new Error(`the ${name} input schema must be a JSON object schema`);
  return { name, description: agentToolDescriptions[name], inputSchema: schema as ListedTool['inputSchema'] };
});

const toolNameSet: ReadonlySet<string> = new Set<string>(agentToolNames);

export function isAgentToolName(name: string): name is AgentToolName {
  return toolNameSet.has(name);
}
