import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentLimitsDefault } from '../broker/agent/agent-limits.js';
import { agentSocketPath } from '../broker/agent/socket-path.js';
import { connectRawLines, initializeFrame, type RawLineClient } from '../broker/testing/malformed-mcp.js';
import { posternBin, repoRoot, startDaemon } from './support/postern-process.js';

/**
 * `postern mcp` under a real daemon whose per-user connection cap evicts the shim's idle connection
 * (docs/agent.md "Connection cap and eviction"): the broker's last line on that connection is an id-null
 * CONNECTION_EVICTED error. A real MCP SDK client behind the shim must not be handed that line (an MCP
 * response needs an id; the SDK reports it as a parse error): the shim says it on stderr, reconnects, and
 * the same client goes on.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pshim-evict-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
}, 60_000);

/** A daemon, ~35 connections and a shim on a shared 2-core machine. */
const testMs = 90_000;

async function waitFor(what: string, done: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function initializedRaw(socketPath: string): Promise<RawLineClient> {
  const raw = await connectRawLines(socketPath);
  cleanup.push(async () => raw.destroy());
  raw.send(initializeFrame(0, 'filler'));
  expect(await raw.nextMessage()).toMatchObject({ id: 0, result: { serverInfo: { name: 'postern' } } });
  raw.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return raw;
}

describe('when the broker evicts the shim’s idle connection at the per-user cap', () => {
  it(
    'the MCP client sees no parse error, the reason is on stderr with its code, and the same client goes on',
    async () => {
      const dataDir = path.join(scratch, 'data');
      const daemon = await startDaemon(dataDir);
      cleanup.push(() => daemon.process.stop());
      const socketPath = agentSocketPath(dataDir);

      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [posternBin, 'mcp', '--data-dir', dataDir],
        cwd: repoRoot,
        stderr: 'pipe',
      });
      let stderr = '';
      transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const client = new Client({ name: 'shim-evicted', version: '1' });
      const errors: unknown[] = [];
      client.onerror = (error) => errors.push(error);
      await client.connect(transport);
      cleanup.push(() => client.close());
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);

      // This process is the agent behind the shim, so its own connections share its count (make-room.ts): fill the
      // cap with them, each more recently active than the shim's. The next one evicts the least recently active of
      // this process's idle connections: the shim's.
      const cap = agentLimitsDefault.connectionsPerUidMax;
      for (let i = 0; i < cap - 1; i += 1) await initializedRaw(socketPath);
      await initializedRaw(socketPath);

      await waitFor('the shim reconnecting', () => stderr.includes('reconnected to the broker'));
      // Nothing reached the client that it could not read: the eviction line has no id, so it is no MCP message.
      expect(errors.map(String)).toEqual([]);
      expect(stderr).toContain(
        'postern mcp: the broker is closing this connection: CONNECTION_EVICTED: closed to make room for another agent connection',
      );
      // The same client, on the shim's new connection (which in turn evicted one of this process's fillers).
      expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('http_request');
      expect(errors.map(String)).toEqual([]);
    },
    testMs,
  );
});
