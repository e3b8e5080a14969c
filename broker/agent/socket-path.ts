import path from 'node:path';

/**
 * Where an agent connects: `<dataDir>/agent/postern.sock`, in its own 0700 directory so its mode never depends on the
 * data dir's. Apart from agent-socket.ts so the shim (`postern mcp`) names it without loading the MCP server.
 */
export const agentSocketDirName = 'agent';
export const agentSocketFileName = 'postern.sock';

export function agentSocketPath(dataDir: string): string {
  return path.join(dataDir, agentSocketDirName, agentSocketFileName);
}
