import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/**
 * The tool set of the upstream MCP test servers (design19 slice A), registered on one SDK `McpServer`. Both the
 * stdio child and the streamable-HTTP server use it; the process-level tools (`env`, `die_after_read`, `count`) only
 * make sense in a process of their own, so the HTTP server leaves them out (`processTools: false`) and answers its
 * own connection-level misbehaviour (`drop_after_read`) before the request reaches the SDK.
 */
export interface UpstreamToolsOptions {
  readonly processTools: boolean;
  /** Tools (name → description) the caller answers itself before the SDK sees the request: listed, never run. */
  readonly interceptedTools?: Readonly<Record<string, string>>;
}

/** Far beyond any reply bound the broker keeps (4 MiB), small enough not to exhaust the test machine. */
export const floodBytesMax = 64 * 1024 * 1024;
const envNameCharsMax = 256;
const failMessageCharsMax = 1_000;

/** Calls this process has received, over every tool: `count` reports it, so a test can tell a warm child from a new one. */
let processCalls = 0;

/** Count one tools/call; the stdio server calls it as each request arrives (before any tool runs). */
export function countProcessCall(): void {
  processCalls += 1;
}

function jsonResult(value: Record<string, unknown>, isError = false): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value, isError };
}

/** Never settles: the request stays unanswered for as long as the process (or session) lives. */
function never(): Promise<CallToolResult> {
  return new Promise<CallToolResult>(() => undefined);
}

function registerPortableTools(server: McpServer): void {
  server.registerTool(
    'echo',
    { description: 'Returns its arguments, as JSON text and as structuredContent.', inputSchema: z.looseObject({}) },
    (args) => jsonResult(args),
  );
  server.registerTool(
    'fail',
    {
      description: 'Answers with isError: true (the tool ran and says it failed).',
      inputSchema: { message: z.string().max(failMessageCharsMax).optional() },
    },
    ({ message }) => ({ content: [{ type: 'text', text: message ?? 'failed as asked' }], isError: true }),
  );
  server.registerTool('hang', { description: 'Never answers.', inputSchema: {} }, never);
  server.registerTool(
    'flood',
    {
      description: 'Answers with `bytes` bytes of text.',
      inputSchema: { bytes: z.number().int().min(0).max(floodBytesMax) },
    },
    ({ bytes }) => ({ content: [{ type: 'text', text: 'x'.repeat(bytes) }] }),
  );
  server.registerTool(
    'add_tool',
    {
      description: 'Registers the tool `extra`, so the server sends notifications/tools/list_changed.',
      inputSchema: {},
    },
    () => {
      const added = !registeredExtra.has(server);
      if (added) {
        registeredExtra.add(server);
        // registerTool on a connected server announces tools/list_changed itself.
        server.registerTool(
          'extra',
          { description: 'Added at runtime by add_tool; echoes its arguments.', inputSchema: z.looseObject({}) },
          (args) => jsonResult({ extra: true, arguments: args }),
        );
      } else {
        server.sendToolListChanged();
      }
      return jsonResult({ added });
    },
  );
}

const registeredExtra = new WeakSet<McpServer>();

function registerProcessTools(server: McpServer): void {
  server.registerTool(
    'env',
    {
      description: 'Returns the value of the environment variable `name` (null when unset).',
      inputSchema: { name: z.string().min(1).max(envNameCharsMax) },
    },
    ({ name }) => jsonResult({ name, value: process.env[name] ?? null }),
  );
  server.registerTool(
    'die_after_read',
    { description: 'Exits the process with code 3 after reading the request, before answering.', inputSchema: {} },
    () => process.exit(3),
  );
  server.registerTool(
    'count',
    {
      description: 'Returns how many tools/call this process has received (this one included) and its pid.',
      inputSchema: {},
    },
    () => jsonResult({ calls: processCalls, pid: process.pid }),
  );
}

export function registerUpstreamTools(server: McpServer, options: UpstreamToolsOptions): void {
  registerPortableTools(server);
  if (options.processTools) registerProcessTools(server);
  for (const [name, description] of Object.entries(options.interceptedTools ?? {})) {
    server.registerTool(name, { description, inputSchema: {} }, never);
  }
}
