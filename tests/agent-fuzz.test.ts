import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { brokerApiMethods } from '../broker/contract/index.js';
import { projectSessions, project } from '../broker/core/index.js';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { connectRawLines, hostileFrame, initializeFrame, type RawLineClient } from '../broker/testing/malformed-mcp.js';
import { FakeClock } from '../broker/testing/fake-clock.js';
import { replayJournal } from '../broker/testing/replay-journal.js';
import { readStateTables } from '../broker/testing/state-tables.js';
import { openVault } from '../broker/vault/index.js';
import { startDaemon } from './support/postern-process.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';

/**
 * Thousands of malformed and hostile MCP messages against a running daemon (real process, real
 * agent socket), mixed with valid and invalid tool calls that reach the journal. Afterwards the
 * daemon still answers, stops cleanly, and the journal's current-state tables (actions, attempts,
 * tickets, sessions) equal both the pure fold of its log and a replay of it into an empty journal.
 * The seed is printed so a failure can be replayed.
 */
const frames = 3_000;
const canary = 'CANARY-fuzz-token-7d1e';
const seed = Number(process.env['POSTERN_FUZZ_SEED'] ?? Date.now() % 2 ** 31);
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pfuzz-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the agent socket under a flood of malformed messages (fuzz, running daemon)', () => {
  it(`keeps answering and keeps its journal equal to its replay (seed ${seed})`, async () => {
    console.log(`agent fuzz seed: ${seed} (POSTERN_FUZZ_SEED=${seed} replays it)`);
    const dataDir = path.join(scratch, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    const passphrase = 'fuzz passphrase (test only)';
    const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await vault.init(Buffer.from(passphrase));
    await vault.add({
      name: 'fuzz-token',
      kind: 'bearer',
      secret: Buffer.from(canary),
      bindings: ['open', '127.0.0.1'],
    });
    await vault.close();
    const passphraseFile = path.join(scratch, 'pass');
    writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
    // The target echoes the injected Authorization header: the broker must scrub it everywhere.
    const target: Server = createServer((req, res) => res.end(`echo: ${req.headers.authorization ?? '(none)'}`));
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    const port = (target.address() as AddressInfo).port;
    writeFileSync(
      path.join(dataDir, 'postern.yaml'),
      [
        'version: 1',
        'agents:',
        '  session_approval: observe',
        'routes:',
        '  - name: open',
        `    base_url: http://127.0.0.1:${port}`,
        '    credential: fuzz-token',
        '    injection: bearer',
        '    approval: none',
        '',
      ].join('\n'),
    );
    await acceptConfigAsPerson(dataDir, passphraseFile);
    const daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
    const socketPath = path.join(dataDir, 'agent', 'postern.sock');
    let stopped = false;
    try {
      const hostile = fc.sample(hostileFrame, { numRuns: frames, seed });
      const validCalls = fc.sample(
        fc.record({
          method: fc.constantFrom('GET', 'POST', 'BREW', ''),
          path: fc.oneof(fc.constant('/ok'), fc.string({ maxLength: 40 })),
          extra: fc.boolean(),
        }),
        { numRuns: 60, seed: seed + 1 },
      );
      let client: RawLineClient | undefined;
      let id = 1_000_000;
      const fresh = async (): Promise<RawLineClient> => {
        client?.destroy();
        const c = await connectRawLines(socketPath);
        c.send(initializeFrame(id++));
        await c.nextMessage();
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        return c;
      };
      client = await fresh();
      // A steady agent beside the flood: its calls (valid and invalid shapes) must all be answered.
      const steady = await fresh();
      const ask = async (args: Record<string, unknown>): Promise<{ result?: { isError?: boolean } }> => {
        const callId = id++;
        steady.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: callId,
            method: 'tools/call',
            params: { name: 'http_request', arguments: args },
          }),
        );
        let reply: { id?: unknown; result?: { isError?: boolean } } = {};
        while (reply.id !== callId) reply = (await steady.nextMessage()) as typeof reply;
        return reply;
      };
      let answered = 0;
      const answers: string[] = [];
      for (const [i, frame] of hostile.entries()) {
        if (client.socket.destroyed) client = await fresh();
        client.send(frame);
        if (i % 50 === 0) {
          const call = validCalls[(i / 50) % validCalls.length];
          const args: Record<string, unknown> = { route: 'open', method: call?.method, path: call?.path };
          if (call?.extra === true) args['credential'] = 'fuzz-token';
          const reply = await ask(args);
          expect(reply.result).toBeDefined();
          answers.push(JSON.stringify(reply));
          answered += 1;
        }
        // Let the server breathe now and then so the flood interleaves with its answers.
        if (i % 200 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      expect(answered).toBe(frames / 50);
      // Some calls really went out and came back with the echo, scrubbed.
      expect(answers.some((a) => a.includes('echo: '))).toBe(true);
      for (const a of answers) expect(a).not.toContain(canary);
      steady.destroy();
      // Still answering: a clean connection lists the six tools.
      const probe = await fresh();
      const listId = id++;
      probe.send(JSON.stringify({ jsonrpc: '2.0', id: listId, method: 'tools/list' }));
      let answer: { id?: unknown; result?: { tools?: unknown[] } } = {};
      while (answer.id !== listId) answer = (await probe.nextMessage()) as typeof answer;
      expect(answer.result?.tools).toHaveLength(7);
      // Agents can never reach the operator API: every operator method, as a JSON-RPC method or as a
      // tool name, is refused with OPERATOR_ONLY on the agent socket.
      for (const method of brokerApiMethods) {
        const asMethod = id++;
        probe.send(JSON.stringify({ jsonrpc: '2.0', id: asMethod, method, params: { ticket: 1 } }));
        let refused: { id?: unknown; error?: { data?: { code?: string } } } = {};
        while (refused.id !== asMethod) refused = (await probe.nextMessage()) as typeof refused;
        expect(refused.error?.data?.code, method).toBe('OPERATOR_ONLY');
        const asTool = id++;
        probe.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: asTool,
            method: 'tools/call',
            params: { name: method, arguments: { ticket: 1 } },
          }),
        );
        let toolReply: {
          id?: unknown;
          result?: { isError?: boolean; structuredContent?: { error?: { code?: string } } };
        } = {};
        while (toolReply.id !== asTool) toolReply = (await probe.nextMessage()) as typeof toolReply;
        expect(toolReply.result?.isError, method).toBe(true);
        expect(toolReply.result?.structuredContent?.error?.code, method).toBe('OPERATOR_ONLY');
      }
      probe.destroy();
      client.destroy();
      const exit = await daemon.process.stop('SIGTERM');
      stopped = true;
      expect(exit.code).toBe(0);
      expect(daemon.process.stdout + daemon.process.stderr).not.toContain(canary);
    } finally {
      if (!stopped) await daemon.process.stop('SIGKILL');
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }

    // The journal: its state tables are the fold of its log, and a replay rebuilds them row for row.
    const reopenedVault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await reopenedVault.unlock(Buffer.from(passphrase));
    const journalPath = path.join(dataDir, 'journal.sqlite');
    const journal = await Journal.open({ path: journalPath, clock: systemClock, vault: reopenedVault });
    try {
      const events = [...journal.events()];
      expect(events.length).toBeGreaterThan(0);
      expect(JSON.stringify(events)).not.toContain(canary);
      expect(readFileSync(journalPath).includes(canary)).toBe(false);
      const folded = project(events);
      const stored = journal.listActions();
      console.log(
        `agent fuzz: ${events.length} events, ${stored.length} actions, ${stored.filter((a) => a.dispatch_seq !== null).length} dispatched, ${journal.listSessions().length} sessions`,
      );
      // The valid-shaped calls interleaved with the flood reached the journal (refused or sent).
      expect(stored.length).toBeGreaterThanOrEqual(20);
      expect(stored.some((a) => a.outcome === 'committed')).toBe(true);
      expect(folded.size).toBe(stored.length);
      for (const state of stored) expect(folded.get(state.action_id)).toEqual(state);
      expect([...projectSessions(events).values()]).toEqual(journal.listSessions());
      const replayDir = path.join(scratch, 'replay');
      mkdirSync(replayDir, { mode: 0o700 });
      const replayPath = path.join(replayDir, 'journal.sqlite');
      const clock = new FakeClock();
      const replay = await Journal.open({ path: replayPath, clock });
      try {
        await replayJournal(events, replay, clock);
      } finally {
        await replay.close();
      }
      const live = readStateTables(journalPath);
      const rebuilt = readStateTables(replayPath);
      expect(rebuilt).toEqual(live);
    } finally {
      await journal.close();
      await reopenedVault.close();
    }
  }, 240_000);
});
