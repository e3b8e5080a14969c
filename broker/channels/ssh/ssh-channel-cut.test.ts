import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent, NewEvent } from '../../contract/index.js';
import type { DispatchGate } from '../../ports/index.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { createMemoryVault, type MemoryVault } from '../../testing/memory-vault.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { TestSshd } from '../../testing/test-sshd.js';
import { SshChannel, type SshChannelReport } from './index.js';

/** Well under the command's 30 s: a cut command ends in this, an uncut one would still run. */
const cutBoundMs = 5_000;

/** The dispatch port in memory (the channel alone, no journal): it says when the exec request may go. */
class DispatchedGate implements DispatchGate {
  readonly kinds: string[] = [];
  private onDispatch: () => void = () => undefined;
  readonly dispatched = new Promise<void>((resolve) => {
    this.onDispatch = resolve;
  });

  beginDispatch(actionId: string, attempt: number): Promise<{ event: JournalEvent }> {
    this.kinds.push('DISPATCH_STARTED');
    this.onDispatch();
    return Promise.resolve({
      event: { kind: 'DISPATCH_STARTED', action_id: actionId, attempt } as unknown as JournalEvent,
    });
  }

  append(event: NewEvent): Promise<{ event: JournalEvent }> {
    this.kinds.push(event.kind);
    return Promise.resolve({ event: event as JournalEvent });
  }
}

const unavailable = TestSshd.unavailableReason();
let sshd: TestSshd | undefined;
let dataDir: TempDir;
let vault: MemoryVault;

beforeAll(async () => {
  dataDir = createTempDir('postern-ssh-cut-');
  vault = await createMemoryVault();
  if (unavailable !== undefined) {
    console.warn(`real-sshd SSH tests skipped: ${unavailable}`);
    return;
  }
  sshd = await TestSshd.start();
}, 30_000);
afterAll(async () => {
  await sshd?.dispose();
  dataDir.remove();
});

describe('SshChannel.cutInFlight (the broker stopped with a command running) on a real OpenSSH sshd', () => {
  it('a running `sleep 30` is cut at once: the call ends within the bound, dispatched, without an exit status', async (ctx) => {
    const s = TestSshd.required(sshd, ctx);
    const gate = new DispatchedGate();
    const channel = new SshChannel({ gate, clock: new FakeClock(), knownHostsDir: dataDir.path, vault });
    const mark = s.logMark();
    const run = channel.perform({
      actionId: 'act_ssh_cut_test',
      host: {
        name: 'lab',
        host: '127.0.0.1',
        port: s.port,
        user: s.user,
        hostKey: { pinned: [s.hostKey.fingerprint] },
      },
      privateKey: s.userKey.privateKey,
      command: 'sleep 30',
      timeoutMs: 60_000,
      outputBytesMax: 1024,
      beforeDispatch: new AbortController().signal,
    });
    await gate.dispatched;
    // sshd's own word that the exec request reached it and it started the command: only then is the cut mid-command.
    await s.waitForLog(/^Starting session: command for /, { from: mark });
    const cutAt = Date.now();
    channel.cutInFlight();
    const ended = await Promise.race([run, sleep(cutBoundMs).then(() => 'still running' as const)]);
    expect(ended).not.toBe('still running');
    expect(Date.now() - cutAt).toBeLessThan(cutBoundMs);
    const report = ended as SshChannelReport;
    expect(report.dispatchStarted).toBe(true);
    expect(report.exitStatus).toBeUndefined();
    expect(report.outputComplete).toBe(false);
  }, 40_000);
});
