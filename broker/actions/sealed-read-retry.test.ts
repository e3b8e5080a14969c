import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describePeer } from '../agent/peer-identity.js';
import { startAgentSocket } from '../agent/agent-socket.js';
import { answerJsonMarker } from '../agent/answer-text.js';
import { parseConfig } from '../config/index.js';
import type { NewEvent } from '../contract/index.js';
import { ResultStore, type Journal } from '../journal/index.js';
import { SocketClientTransport } from '../sdk/socket-client-transport.js';
import { actionPaths } from '../testing/action-paths.js';
import { inSession, sessionStartedEvent } from '../testing/session-events.js';
import { openLockedVaultRuns, type LockedVaultRuns } from '../testing/locked-vault-runs.js';
import { createAgentBackend, sessionIdFor } from './agent-backend.js';

/**
 * The retry a refused read advises while the vault is locked, through the real agent backend on a real journal file
 * and a real vault, asked by a real MCP client over the agent socket (this process is the agent: its session, opened in
 * the first run, is the one it reconnects to), across three broker runs as in sealed-decision-hint.test.ts:
 * - run 1 starts locked before any audit key exists and is never unlocked: its key is sealed to no one, so what it
 *   sealed (act_neverkeyed's events and stored result) no unlock ever opens;
 * - run 2 starts locked, a person unlocks (the audit keys are made, run 2's key sealed): act_keyedrun;
 * - run 3 starts locked.
 * In run 3, locked, a read of act_neverkeyed's result (fetch_result) or events (a retry_of reads the original's) is
 * refused retry `never`, and says the run's seal holds for good — in the structured reply and in the text block a
 * client reading only text gets; the same reads of act_keyedrun are refused retry-after-unlock (fetch_result,
 * backoff), and after the unlock its result reads.
 */
const passphrase = Buffer.from('correct horse battery staple');
const canary = 'CANARY-sealed-result-body';
const config = parseConfig(
  [
    'version: 1',
    'agents:',
    '  session_approval: observe',
    'routes:',
    '  - name: docs',
    '    base_url: http://127.0.0.1:9/api',
    '    credential: docs-token',
    '    injection: bearer',
    '    approval: none',
    '    methods: [POST]',
    '    retry: { attempts_max: 2, automatic: false, backoff_ms: 0 }',
    '',
  ].join('\n'),
);
/** This process as the agent socket reads its peer: the session run 1 records is the one it reconnects to. */
const peer = describePeer({ pid: process.pid, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 });
const session = sessionIdFor('boot-run-1', peer);

let runs: LockedVaultRuns;

beforeEach(async () => {
  runs = await openLockedVaultRuns('postern-sealed-retry-', passphrase);
});
afterEach(async () => {
  await runs.dispose();
});

/** An HTTP action of `session` that committed and delivered its result, stored sealed under this run's key. */
async function committedAction(journal: Journal, id: string): Promise<void> {
  for (const event of inSession(actionPaths.httpNoApproval(id), session) as NewEvent[]) {
    runs.clock.advance(10);
    await journal.append(event);
  }
  const results = ResultStore.open(runs.path, journal.rowCipher(), { role: 'broker' });
  try {
    results.commit({
      result_id: `res_${id}`,
      action_id: id,
      attempt: 1,
      summary: { status: 200 },
      body: Buffer.from(canary),
      total_bytes: canary.length,
      truncated: false,
      digest: 'sha256:x',
      created_at_ms: runs.clock.nowMs(),
    });
  } finally {
    results.close();
  }
  expect(journal.getAction(id)).toMatchObject({ session_id: session, stage: 'result_delivered' });
}

interface Read {
  readonly structured: unknown;
  /** The readable lines of the text block, above its JSON. */
  readonly lines: string;
  /** The JSON of the text block. */
  readonly json: unknown;
}

/** Serves run 3's journal to a real MCP client over the agent socket, and hands `body` its calls. */
async function asAgent(journal: Journal, body: (call: (name: string, args: object) => Promise<Read>) => Promise<void>) {
  const results = ResultStore.open(runs.path, journal.rowCipher(), { role: 'broker' });
  const backend = await createAgentBackend(
    runs.agentBackendDeps(journal, results, config, { processAlive: () => true, bootId: 'boot-run-3' }),
  );
  const socket = await startAgentSocket({ dataDir: runs.dataDir, backend });
  const client = new Client({ name: 'sealed-retry-test', version: '1' });
  try {
    await client.connect(new SocketClientTransport(socket.path));
    await client.listTools();
    await body(async (name, args) => {
      const result = (await client.callTool({ name, arguments: { ...args } })) as CallToolResult;
      const block = result.content[0];
      if (block?.type !== 'text') throw new Error('the first content block is not text');
      const [lines = '', json = ''] = block.text.split(`\n${answerJsonMarker}\n`);
      expect(result.isError).toBe(true);
      return { structured: result.structuredContent, lines, json: JSON.parse(json) };
    });
  } finally {
    await client.close();
    await socket.close();
    backend.close();
    results.close();
  }
}

const forGood = 'sealed in the journal for good, and no unlock opens';

describe('a read refused while the vault is locked: retry after the unlock only where the unlock opens it', () => {
  it('a run that never had a key answers never, locked; a keyed earlier run answers retry after the unlock', async () => {
    await runs.run(async (journal) => {
      await journal.appendSession(sessionStartedEvent(session, peer.pid, { start_time: peer.start_time }));
      await committedAction(journal, 'act_neverkeyed');
    });
    await runs.run(async (journal) => {
      await committedAction(journal, 'act_keyedrun');
      await runs.vault.unlock(passphrase);
    });
    runs.vault.lock('operator');
    await runs.run(async (journal) => {
      expect(runs.vault.state()).toBe('locked');
      expect(journal.subjectSealedForGood('act_neverkeyed')).toBe(true);
      expect(journal.subjectSealedForGood('act_keyedrun')).toBe(false);
      const retryOf = (id: string) => ({ route: 'docs', method: 'POST', path: '/documents/1', retry_of: id });
      await asAgent(journal, async (call) => {
        const reads: Array<[string, object, object, string]> = [
          // The stored result is handed over on the action's own sealed events (Journal.sealedAction), read first: a run
          // that never had a key sealed them to no one; a keyed run's need the unlock, and the result with them.
          [
            'fetch_result',
            { action_id: 'act_neverkeyed' },
            { code: 'AUDIT_KEY_UNAVAILABLE', retry: 'never' },
            `AUDIT_KEY_UNAVAILABLE: run 1 ended before any audit key existed: its events are ${forGood} them`,
          ],
          [
            'fetch_result',
            { action_id: 'act_keyedrun' },
            { code: 'AUDIT_KEY_UNAVAILABLE', retry: 'fetch_result' },
            'AUDIT_KEY_UNAVAILABLE: events of run 2 (an earlier broker run) need the unlocked vault',
          ],
          // The events (a retry_of reads the original's before it resends anything): the same split.
          [
            'http_request',
            retryOf('act_neverkeyed'),
            { code: 'AUDIT_KEY_UNAVAILABLE', retry: 'never' },
            `AUDIT_KEY_UNAVAILABLE: run 1 ended before any audit key existed: its events are ${forGood} them`,
          ],
          [
            'http_request',
            retryOf('act_keyedrun'),
            { code: 'AUDIT_KEY_UNAVAILABLE', retry: 'backoff' },
            'AUDIT_KEY_UNAVAILABLE: events of run 2 (an earlier broker run) need the unlocked vault',
          ],
        ];
        for (const [name, args, error, headline] of reads) {
          const what = `${name} ${JSON.stringify(args)}`;
          const read = await call(name, args);
          expect(read.structured, what).toMatchObject({ invocation_id: null, error });
          expect(read.json, what).toEqual(read.structured);
          // A client that reads only the text is told the same: the headline, and the error line's retry.
          const retry = (error as { retry: string }).retry;
          expect(read.lines.split('\n')[0], what).toBe(headline);
          expect(read.lines, what).toContain(`· retry: ${retry} ·`);
          if (retry === 'never') expect(read.lines, what).not.toContain('unlocked vault');
          expect(read.lines, what).not.toContain(canary);
        }
      });

      // The advice held: unlocked, the keyed run's result reads, the other's is refused the same, for good.
      await runs.vault.unlock(passphrase);
      const results = ResultStore.open(runs.path, journal.rowCipher(), { role: 'broker' });
      try {
        expect(results.read('res_act_keyedrun')?.body.toString()).toBe(canary);
        expect(() => results.read('res_act_neverkeyed')).toThrow(
          expect.objectContaining({ code: 'AUDIT_KEY_UNAVAILABLE' }),
        );
      } finally {
        results.close();
      }
    });
  });
});
