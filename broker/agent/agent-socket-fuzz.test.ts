import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SocketClientTransport } from '../sdk/socket-client-transport.js';
import { connectRawLines, hostileFrame, initializeFrame } from '../testing/malformed-mcp.js';
import { ScriptedAgentBackend } from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { startAgentSocket, type AgentSocket } from './agent-socket.js';

/**
 * ~3,000 hostile frames against a real socket with the scripted backend: after each batch the
 * connection still answers a ping (or was closed by a limit), nothing escapes as an uncaught error,
 * and at the end a fresh, well-behaved client can still list the tools.
 */
describe('when a client sends hostile frames', () => {
  let dir: TempDir;
  let socket: AgentSocket;
  const escaped: unknown[] = [];
  const onEscape = (error: unknown): void => {
    escaped.push(error);
  };

  beforeAll(async () => {
    dir = createTempDir('postern-fuzz-');
    // Small frame limit so oversized frames are among the samples; handshake long enough for a batch.
    socket = await startAgentSocket({
      dataDir: dir.path,
      backend: new ScriptedAgentBackend(),
      limits: { frameBytesMax: 16 * 1024, handshakeMs: 30_000 },
    });
    process.on('uncaughtException', onEscape);
    process.on('unhandledRejection', onEscape);
  });
  afterAll(async () => {
    process.off('uncaughtException', onEscape);
    process.off('unhandledRejection', onEscape);
    await socket.close();
    dir.remove();
  });

  it('keeps answering and never throws out of the server', async () => {
    let batch = 0;
    let framesSent = 0;
    let answered = 0;
    let closedByLimit = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(hostileFrame, { minLength: 30, maxLength: 70, size: 'max' }),
        async (initialize, frames) => {
          batch += 1;
          const client = await connectRawLines(socket.path);
          try {
            if (initialize) client.send(initializeFrame(`init-${batch}`));
            for (const frame of frames) client.send(frame);
            framesSent += frames.length;
            const pingId = `postern-fuzz-ping-${batch}`;
            client.send(JSON.stringify({ jsonrpc: '2.0', id: pingId, method: 'ping' }));
            // Read until the ping's answer or the server closed the connection (a limit fired).
            // Bounded: every frame gets at most a few answer lines.
            for (let read = 0; read < frames.length * 4 + 10; read += 1) {
              const message = (await client.nextMessage().catch(() => 'closed')) as { id?: unknown } | 'closed';
              if (message === 'closed') {
                closedByLimit += 1;
                return;
              }
              if (typeof message === 'object' && message !== null && message.id === pingId) {
                expect(message).toEqual({ jsonrpc: '2.0', id: pingId, result: {} });
                answered += 1;
                return;
              }
            }
            throw new Error('no answer to the ping');
          } finally {
            client.destroy();
          }
        },
      ),
      { numRuns: 60, seed: 20261130, endOnFailure: true },
    );
    expect(framesSent).toBeGreaterThan(2_500);
    // Batches end either at the ping or cut off by a limit (frame size); most reach the ping.
    expect(answered + closedByLimit).toBe(60);
    expect(answered).toBeGreaterThan(30);

    const client = new Client({ name: 'after-fuzz', version: '1' });
    await client.connect(new SocketClientTransport(socket.path));
    expect((await client.listTools()).tools).toHaveLength(7);
    await client.close();
    expect(escaped).toEqual([]);
  }, 120_000);
});
