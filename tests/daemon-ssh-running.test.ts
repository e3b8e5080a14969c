import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ActionListRow } from '../broker/contract/index.js';
import { Journal, journalFileName, ResultStore } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { TestSshd } from '../broker/testing/test-sshd.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { DrillAgent, type ToolReply } from './support/drill-agent.js';
import { runPostern } from './support/postern-process.js';

/**
 * A real daemon running an agent's `ssh_exec sleep 30` on a real OpenSSH sshd, as a person sees it from the operator
 * CLI: `status` and `metrics` (its counts and its per-minute rate) count the running command as in flight / open, never as an unknown outcome (the unknown
 * is the one command that settled so); `actions list` shows its furthest stage while it runs (`--json`: outcome null,
 * not the dispatch's provisional unknown; `actions show` says the same), and `--outcome unknown`
 * lists only the settled one (`--open` the running one); and a SIGTERM whose
 * drain cuts it logs no error for the recording the stop left open (docs/operator.md "Stopping", step 3): the row stays
 * open, marked alive at the stop, and reads RECORDING_INCOMPLETE after the restart. Between the stop and the restart,
 * `status` reads the file and counts the cut command unknown (nothing runs it), never in flight.
 */
const drainMs = 2_000;
const unavailable = TestSshd.unavailableReason();
let sshd: TestSshd | undefined;
let running: BearerRouteDaemon | undefined;
let agent: DrillAgent | undefined;

beforeAll(async () => {
  if (unavailable !== undefined) {
    console.warn(`real-sshd daemon tests skipped: ${unavailable}`);
    return;
  }
  sshd = await TestSshd.start();
}, 30_000);
afterAll(async () => {
  await sshd?.dispose();
});
afterEach(async () => {
  await agent?.stop();
  await running?.stop();
  agent = undefined;
  running = undefined;
});

/** Two host entries on the one sshd: `box` (deadline 2 min) and `quick` (deadline 1 s: a longer command ends unknown). */
function sshHostsYaml(s: TestSshd): string[] {
  const entry = (name: string, timeoutMs: number): string[] => [
    `  - name: ${name}`,
    '    host: 127.0.0.1',
    `    port: ${s.port}`,
    `    user: ${s.user}`,
    '    credential: box-key',
    '    host_key:',
    '      pinned:',
    `        - ${s.hostKey.fingerprint}`,
    '    approval: none',
    `    timeout_ms: ${timeoutMs}`,
  ];
  return ['ssh_hosts:', ...entry('box', 120_000), ...entry('quick', 1_000)];
}

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runPostern([...args, '--data-dir', (running as BearerRouteDaemon).dataDir]);
}

async function listed(): Promise<ActionListRow[]> {
  const out = await cli(['actions', 'list', '--json']);
  expect(out.code, out.stderr).toBe(0);
  return (JSON.parse(out.stdout) as { actions: ActionListRow[] }).actions;
}

async function until<T>(what: string, read: () => Promise<T | undefined>, withinMs = 20_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('an ssh_exec still running on a real sshd, seen by the operator CLI and cut by SIGTERM', () => {
  it('counts it in flight (not unknown), shows its stage, the stop that cuts it logs no error, and with no broker it is unknown', async (ctx) => {
    const s = TestSshd.required(sshd, ctx);
    running = await startBearerRouteDaemon({
      prefix: 'psshrun-',
      canary: 'CANARY-psshrun-4d2',
      respond: (_req, res) => res.end('ok'),
      args: ['--test-drain-ms', String(drainMs)],
      // At info, so the line saying the stop left the recording open is seen.
      env: { POSTERN_LOG_LEVEL: 'info' },
      credentials: [
        { name: 'box-key', kind: 'ssh_key', secret: Buffer.from(s.userKey.privateKey), bindings: ['box', 'quick'] },
      ],
      yaml: sshHostsYaml(s),
    });
    agent = await DrillAgent.start(running.dataDir, 'psshrun-agent');

    // One command that settles unknown: past its entry's 1 s deadline after dispatch.
    const late = await agent.call('ssh_exec', { host: 'quick', command: 'sleep 5' }).reply;
    expect(late.structuredContent?.error).toMatchObject({ code: 'OPERATION_TIMEOUT', outcome: 'unknown' });

    // One still running.
    const call = agent.call('ssh_exec', { host: 'box', command: 'sleep 30' });
    const lost = call.reply.then(
      (reply: ToolReply) => reply,
      (error: unknown) => error,
    );
    const row = await until('the running command on the action list', async () =>
      (await listed()).find((a) => a.target === 'box' && a.stage === 'response_started'),
    );
    // In flight, as status counts it: no outcome (nor effect) until one is recorded, never the dispatch's provisional
    // unknown; the settled one keeps its recorded unknown.
    expect(row).toMatchObject({ outcome: null, effect: null, settled_at_ms: null, duration_ms: null });
    // actions show agrees: no outcome (nor effect) yet, with how far it got.
    const shown = await cli(['actions', 'show', row.action_id, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect((JSON.parse(shown.stdout) as { state: unknown }).state).toMatchObject({
      action_id: row.action_id,
      outcome: null,
      effect: null,
      recorded: false,
      phase: 'remote_execution',
      stage: 'response_started',
    });
    const shownText = (await cli(['actions', 'show', row.action_id])).stdout;
    expect(shownText).toContain('outcome -  phase remote_execution');
    expect(shownText).toContain('effect -  basis dispatch_started_no_result_recorded');
    expect((await listed()).find((a) => a.target === 'quick')).toMatchObject({
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'OPERATION_TIMEOUT',
    });

    // status: the running command is in flight, and only the settled one is unknown.
    const status = await cli(['status', '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ actions: { total: 2, in_flight: 1, unknown: 1 } });
    expect((await cli(['status'])).stdout).toContain('Actions: 2 total, 1 in flight, 1 unknown');

    // metrics: open holds the running command; remote_execution/unknown only the settled one.
    const metrics = JSON.parse((await cli(['metrics', '--json'])).stdout) as {
      total: number;
      open: number;
      by_phase_outcome: Array<{ phase: string; outcome: string; count: number }>;
      by_code: Array<{ code: string; count: number }>;
      rate: { by_outcome: Array<{ outcome: string; counts: number[] }> };
    };
    expect(metrics).toMatchObject({ total: 2, open: 1 });
    expect(metrics.by_phase_outcome).toEqual([{ phase: 'remote_execution', outcome: 'unknown', count: 1 }]);
    expect(metrics.by_code).toEqual([{ code: 'OPERATION_TIMEOUT', count: 1 }]);
    // The rate likewise: its per-minute unknown counts hold the settled one only, never the running command.
    const rateTotals = Object.fromEntries(
      metrics.rate.by_outcome.map(({ outcome, counts }) => [outcome, counts.reduce((a, b) => a + b, 0)]),
    );
    expect(rateTotals).toEqual({ unknown: 1 });
    expect((await cli(['metrics'])).stdout).toContain('2 actions, 1 open');

    // actions list: the running line names its stage, not the dispatch's provisional unknown.
    const lines = (await cli(['actions', 'list'])).stdout.split('\n');
    const runningLine = lines.find((l) => l.includes('  box  '));
    expect(runningLine).toMatch(/ {2}response_started {2}open$/);
    expect(runningLine).not.toContain('unknown');
    expect(lines.find((l) => l.includes('  quick  '))).toContain('unknown/unknown_effect (OPERATION_TIMEOUT)');
    // --outcome unknown agrees with status: the settled one only; the running one is what --open finds.
    const byOutcome = await cli(['actions', 'list', '--outcome', 'unknown', '--json']);
    const unknownTargets = (JSON.parse(byOutcome.stdout) as { actions: ActionListRow[] }).actions.map((a) => a.target);
    expect(unknownTargets).toEqual(['quick']);
    const openRows = await cli(['actions', 'list', '--open', '--json']);
    const openIds = (JSON.parse(openRows.stdout) as { actions: ActionListRow[] }).actions.map((a) => a.action_id);
    expect(openIds).toContain(row.action_id);

    // SIGTERM: the drain runs out, the command is cut, and nothing is logged as an error for it.
    const daemon = running.daemon.process;
    const stopAtMs = Date.now();
    expect(await daemon.stop('SIGTERM', 20_000)).toEqual({ code: 0, signal: null });
    expect(daemon.stderr).toContain('1 action(s) still in flight: cut');
    expect(daemon.stderr).not.toMatch(/"level":50/);
    expect(daemon.stderr).toContain('ssh recording left open: the broker stopped before it was sealed');
    expect(await lost).toBeDefined();

    // Stopped, before any restart: nothing runs the cut command, so status (reading the file) calls it unknown, not in
    // flight (DESIGN §2; the next start records BROKER_RESTARTED).
    const offline = JSON.parse((await cli(['status', '--json'])).stdout) as unknown;
    expect(offline).toMatchObject({
      broker_running: false,
      journal_read_from: 'file',
      actions: { total: 2, in_flight: 0, unknown: 2, dispatched_unrecorded: 1 },
    });
    const offlineText = (await cli(['status'])).stdout;
    expect(offlineText).toContain('Broker: not running for this data directory');
    expect(offlineText).toContain(
      'Actions: 2 total, 0 in flight, 2 unknown (1 dispatched, no outcome recorded: no broker is running; its next start records it unknown)',
    );
    // metrics has no offline reading: it asks the broker, and says none is running.
    const offlineMetrics = await cli(['metrics']);
    expect(offlineMetrics.code).not.toBe(0);
    expect(offlineMetrics.stderr).toContain('no broker is running');

    // After the restart: recorded unknown (BROKER_RESTARTED), its recording open and kept from the stop on.
    const journal = await Journal.open({ dataDir: running.dataDir, clock: systemClock });
    const results = ResultStore.open(path.join(running.dataDir, journalFileName), journal.rowCipher(), {
      role: 'broker',
    });
    try {
      expect(journal.getAction(row.action_id)).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED' });
      expect(() => results.recordings.read(row.action_id)).toThrow(
        expect.objectContaining({ code: 'RECORDING_INCOMPLETE' }),
      );
      const [open] = results.recordings.openActionIds('', 10);
      expect(open).toBe(row.action_id);
    } finally {
      results.close();
      await journal.close();
    }
    // Marked alive at the stop (not only at its start): purged a retention after the stop, not after the exec.
    const db = new Database(path.join(running.dataDir, journalFileName), { readonly: true });
    try {
      const rec = db
        .prepare('SELECT started_at_ms, alive_at_ms FROM recordings WHERE action_id = ?')
        .get(row.action_id);
      expect(rec).toMatchObject({ alive_at_ms: expect.any(Number) as number });
      const { started_at_ms: startedAtMs, alive_at_ms: aliveAtMs } = rec as {
        started_at_ms: number;
        alive_at_ms: number;
      };
      expect(aliveAtMs).toBeGreaterThanOrEqual(stopAtMs);
      expect(aliveAtMs).toBeGreaterThan(startedAtMs);
    } finally {
      db.close();
    }
  }, 120_000);
});
