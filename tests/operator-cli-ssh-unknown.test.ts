import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sshHostsYaml } from '../broker/testing/ssh-action-harness.js';
import { TestSshd } from '../broker/testing/test-sshd.js';
import { createDataDir, observeYaml } from './support/create-data-dir.js';
import { DrillAgent } from './support/drill-agent.js';
import { op, waitFor } from './support/drill.js';
import { PosternProcess, startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * A person facing an SSH action whose outcome is unknown, end to end: a real sshd, a real daemon SIGKILLed while an
 * agent's `sleep 40` runs on it, the daemon started again, then the built CLI as the person uses it. What they must
 * be able to tell: which command it was (the journal keeps only its digest, never the command, and says so), where it
 * blocks, and the exact command lines that clear it — reconcile and retry have nothing to ask or resend for SSH, and
 * their refusals say what can be done instead. The agent is told `reconcile` (DESIGN §3: an unknown that is neither
 * idempotent nor under a key waits for reconciliation, which for SSH is a person's attestation or abandon).
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'posshunk-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'sshunk.pass');
let sshd: TestSshd | undefined;
let daemon: RunningDaemon | undefined;
let agent: DrillAgent | undefined;

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = new PosternProcess([...args, '--data-dir', dataDir]);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

const startDaemonHere = (): Promise<RunningDaemon> =>
  startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });

beforeAll(async () => {
  if (TestSshd.unavailableReason() !== undefined) return;
  sshd = await TestSshd.start();
  await createDataDir({
    dataDir,
    passphrase: 'ssh unknown passphrase (test only)',
    credential: { name: 'lab-key', kind: 'ssh_key', secret: sshd.userKey.privateKey, bindings: ['lab', '127.0.0.1'] },
    yaml: observeYaml(
      sshHostsYaml([{ port: sshd.port, user: sshd.user, credential: 'lab-key', hostKey: [sshd.hostKey.fingerprint] }]),
      // Abandon is a decision; this test takes it without a terminal (the CI opt-out).
      { unattended: true },
    ),
    acceptWith: passphraseFile,
  });
  daemon = await startDaemonHere();
  agent = await DrillAgent.start(dataDir, 'sshunk-agent');
}, 90_000);

afterAll(async () => {
  await agent?.stop();
  await daemon?.process.stop('SIGTERM');
  await sshd?.dispose();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('an SSH action left unknown by a daemon killed mid-command, as a person meets it in the CLI', () => {
  let actionId = '';
  let ticket = 0;
  let fingerprint = '';

  beforeAll(async () => {
    if (sshd === undefined || agent === undefined || daemon === undefined) return;
    // The agent's own call ends when the daemon dies; what it was answered does not matter here.
    agent.call('ssh_exec', { host: 'lab', command: 'sleep 40', timeout_ms: 55_000 }).reply.catch(() => undefined);
    const sent = await waitFor(
      () => op(dataDir, 'activity.list', { limit: 100 }),
      (page) => page.events.some((e) => e.kind === 'REQUEST_SENT'),
      'the exec request written to the real sshd',
    );
    const accepted = sent.events.find((e) => e.kind === 'ACTION_ACCEPTED');
    actionId = accepted?.action_id ?? '';
    await daemon.process.stop('SIGKILL');
    daemon = await startDaemonHere();
    const shown = await op(dataDir, 'actions.show', { action_id: actionId });
    expect(shown.state).toMatchObject({ channel: 'ssh', outcome: 'unknown', code: 'BROKER_RESTARTED' });
    ticket = shown.state.ticket ?? 0;
    fingerprint = shown.state.request_fingerprint;
  }, 90_000);

  it('approvals list names the command as not kept, its digest and action, and the command lines that clear it', async (ctx) => {
    TestSshd.required(sshd, ctx);
    const listed = await cli(['approvals', 'list']);
    expect(listed.code).toBe(0);
    const line = listed.stdout.split('\n').find((l) => l.startsWith(`#${ticket} `)) ?? '';
    expect(line).toContain('host:lab $ (command not kept: the journal holds only its digest');
    expect(line).toContain(fingerprint);
    expect(line).toContain(`action ${actionId}, accepted `);
    expect(line).toContain(`postern actions attest ${actionId} --outcome committed|rejected`);
    expect(line).toContain(`postern approvals abandon ${ticket} --reason`);
    expect(line).not.toContain('sleep 40');
  });

  it('actions show and actions recording say the command is not kept and name what identifies it', async (ctx) => {
    TestSshd.required(sshd, ctx);
    const shown = await cli(['actions', 'show', actionId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`command: not kept (the journal holds only its digest ${fingerprint}`);
    expect(shown.stdout).toContain(
      `ways out: a person who checked the remote settles it: postern actions attest ${actionId}`,
    );
    expect(shown.stdout).not.toContain('postern actions reconcile');
    const recording = await cli(['actions', 'recording', actionId]);
    expect(recording.code).toBe(1);
    expect(recording.stderr).toContain('RECORDING_INCOMPLETE');
    expect(recording.stderr).toContain(`ticket #${ticket} host:lab exec ${fingerprint}`);
    expect(recording.stderr).toContain(`postern actions attest ${actionId}`);
  });

  it('reconcile and retry refuse with what the person can do instead; the agent is told reconcile', async (ctx) => {
    TestSshd.required(sshd, ctx);
    const reconciled = await cli(['actions', 'reconcile', actionId]);
    expect(reconciled.code).toBe(1);
    expect(reconciled.stderr).toMatch(/UNSUPPORTED_ACTION .*is an SSH command: nothing can ask the host/);
    expect(reconciled.stderr).toContain(`postern actions attest ${actionId} --outcome committed|rejected`);
    expect(reconciled.stderr).toContain(`postern approvals abandon ${ticket} --reason`);
    const retried = await cli(['actions', 'retry', actionId]);
    expect(retried.code).toBe(1);
    expect(retried.stderr).toMatch(/UNSUPPORTED_ACTION .*an SSH command is never resent/);
    expect(retried.stderr).toContain(`postern actions attest ${actionId} --outcome committed|rejected`);
    expect(retried.stderr).toContain(`postern approvals abandon ${ticket} --reason`);
    if (agent === undefined) throw new Error('no agent');
    const status = await agent.call('action_status', { action_id: actionId }).reply;
    expect(status.structuredContent?.error).toMatchObject({ outcome: 'unknown', retry: 'reconcile' });
  });

  it('actions list --open finds the blocking unknown, and no longer once a person abandoned it', async (ctx) => {
    TestSshd.required(sshd, ctx);
    const open = await cli(['actions', 'list', '--open']);
    expect(open.code).toBe(0);
    expect(open.stdout).toContain(`#${ticket} `);
    expect(open.stdout).toContain('host:lab');
    expect(open.stdout).not.toContain('No actions match');
    const abandoned = await cli(['approvals', 'abandon', String(ticket), '--reason', 'checked the lab host']);
    expect(abandoned.code).toBe(0);
    expect((await cli(['actions', 'list', '--open'])).stdout).toContain('No actions match.');
  });
});
