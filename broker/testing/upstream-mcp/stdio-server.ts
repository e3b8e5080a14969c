import { appendFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { countProcessCall, registerUpstreamTools } from './upstream-tools.js';

/**
 * A real upstream MCP server on stdio (design19 slice A), for the broker's `mcp` channel tests:
 * `node --import tsx broker/testing/upstream-mcp/stdio-server.ts [flags]`, or spawn `stdioServerCommand(flags)`, which
 * gives absolute paths so it runs from any cwd and with any PATH (the broker starts children with a fixed safe one).
 *
 * Tools: see upstream-tools.ts (echo, env, fail, die_after_read, hang, flood, count, add_tool → extra).
 * Flags:
 * - `--crash-at-start`: exit 1 before initialize (the spawn/initialize setup failure).
 * - `--stderr-env NAME`: write `NAME=<value of env NAME>` to stderr at start (the broker must scrub it from its log).
 * - `--stderr-env-escaped NAME`: write the value escaped in forms an exact match misses, one line each — every
 *   character an HTML character reference (`NAME.html=&#x70;…`), and every character a JSON `\uXXXX` escape
 *   inside a JSON string inside a JSON string (`NAME.json="{\"v\":\"\\u0070…\"}"`).
 * - `--initialize-delay-ms N`: write `delaying initialize` to stderr, then read nothing for N ms (a slow start).
 * - `--marker-file PATH`: append one JSON line `{"tool":…,"pid":…}` per tools/call received, synchronously, before
 *   the tool runs — the ground truth of whether a call reached the server, even when the tool then kills the process.
 */

const scriptPath = fileURLToPath(import.meta.url);

/** The command line that starts this server: node itself, tsx's loader and this file, all absolute. */
export function stdioServerCommand(flags: readonly string[] = []): { command: string; args: string[] } {
  const tsxLoader = createRequire(import.meta.url).resolve('tsx');
  return { command: process.execPath, args: ['--import', tsxLoader, scriptPath, ...flags] };
}

interface StdioServerFlags {
  readonly crashAtStart: boolean;
  readonly stderrEnv?: string;
  readonly stderrEnvEscaped?: string;
  readonly markerFile?: string;
  readonly initializeDelayMs?: number;
}

function parseFlags(argv: readonly string[]): StdioServerFlags {
  let crashAtStart = false;
  let stderrEnv: string | undefined;
  let stderrEnvEscaped: string | undefined;
  let markerFile: string | undefined;
  let initializeDelayMs: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === '--crash-at-start') crashAtStart = true;
    else if (flag === '--stderr-env' && value !== undefined) [stderrEnv, i] = [value, i + 1];
    else if (flag === '--stderr-env-escaped' && value !== undefined) [stderrEnvEscaped, i] = [value, i + 1];
    else if (flag === '--marker-file' && value !== undefined) [markerFile, i] = [value, i + 1];
    else if (flag === '--initialize-delay-ms' && value !== undefined) [initializeDelayMs, i] = [Number(value), i + 1];
    else
      throw new Error(
        `usage: stdio-server.ts [--crash-at-start] [--stderr-env NAME] [--stderr-env-escaped NAME] [--marker-file PATH]` +
          ` [--initialize-delay-ms N]` +
          ` (at ${flag})`,
      );
  }
  return {
    crashAtStart,
    ...(stderrEnv === undefined ? {} : { stderrEnv }),
    ...(stderrEnvEscaped === undefined ? {} : { stderrEnvEscaped }),
    ...(markerFile === undefined ? {} : { markerFile }),
    ...(initializeDelayMs === undefined ? {} : { initializeDelayMs }),
  };
}

/** `value` in two escaped forms, each on its own line: HTML character references, and \\u escapes nested in JSON. */
export function escapedLines(name: string, value: string): string {
  const chars = [...value];
  const html = chars.map((c) => `&#x${(c.codePointAt(0) ?? 0).toString(16)};`).join('');
  const unicode = value
    .split('')
    .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .join('');
  const json = JSON.stringify(`{"v":"${unicode}"}`);
  return `${name}.html=${html}\n${name}.json=${json}\n`;
}

function toolCalled(message: JSONRPCMessage): string | undefined {
  if (!('method' in message) || message.method !== 'tools/call' || !('id' in message)) return undefined;
  const name = (message.params as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : '';
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  if (flags.stderrEnv !== undefined) process.stderr.write(`${flags.stderrEnv}=${process.env[flags.stderrEnv] ?? ''}\n`);
  if (flags.stderrEnvEscaped !== undefined)
    process.stderr.write(escapedLines(flags.stderrEnvEscaped, process.env[flags.stderrEnvEscaped] ?? ''));
  if (flags.crashAtStart) {
    process.stderr.write('crashing at start, as asked\n');
    process.exit(1);
  }
  if (flags.initializeDelayMs !== undefined) {
    process.stderr.write('delaying initialize\n');
    await new Promise((resolve) => setTimeout(resolve, flags.initializeDelayMs));
  }
  const server = new McpServer({ name: 'postern-upstream-stdio', version: '1.0.0' });
  registerUpstreamTools(server, { processTools: true });
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // Wrapped right after connect, before the event loop can deliver a line: every tools/call is counted and recorded
  // as it is read, before the SDK dispatches it to a tool (which may exit the process or never answer).
  const deliver = transport.onmessage;
  transport.onmessage = (message) => {
    const tool = toolCalled(message);
    if (tool !== undefined) {
      countProcessCall();
      if (flags.markerFile !== undefined)
        appendFileSync(flags.markerFile, `${JSON.stringify({ tool, pid: process.pid })}\n`);
    }
    deliver?.(message);
  };
  // A parent that goes away closes our stdin; an orphaned test server must not live on.
  process.stdin.once('end', () => process.exit(0));
}

function isMainModule(): boolean {
  const invoked = process.argv[1];
  if (invoked === undefined) return false;
  try {
    return realpathSync(invoked) === realpathSync(scriptPath);
  } catch {
    return false;
  }
}

if (isMainModule()) {
  main().catch((error: unknown) => {
    process.stderr.write(`stdio-server: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  });
}
