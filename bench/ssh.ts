/**
 * SSH channel benchmark: the latency the broker adds to one `exec` (approval none, ssh_key from a
 * real vault, journal with fsync) against the test OpenSSH sshd (broker/testing/test-sshd.ts),
 * compared with ssh2 used directly (connect, exec, wait for exit + close, end) on the same server.
 * Connection reuse policy: ONE CONNECTION PER ACTION, no reuse yet — both sides pay the full
 * TCP + key exchange + auth + channel open every run, so the difference is the broker's own work
 * (validation, vault, journal appends and the durable DISPATCH_STARTED, result rows).
 *
 *   node --import tsx bench/ssh.ts
 *
 * Not part of the test run. Bounded: `runs` sequential runs per side after `warmupRuns`.
 */
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { mkdirSync } from 'node:fs';
import ssh2 from 'ssh2';
import { SshChannel } from '../broker/channels/ssh/index.js';
import { ResultStore } from '../broker/journal/index.js';
import { createRandomIdSource, systemClock } from '../broker/ports/index.js';
import { ApprovalQueue } from '../broker/queue/approval-queue.js';
import { executeSshAction } from '../broker/actions/execute-ssh-action.js';
import { sshHostsConfig } from '../broker/testing/ssh-action-harness.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { TestSshd } from '../broker/testing/test-sshd.js';
import { openVault } from '../broker/vault/index.js';

const runs = 200;
const warmupRuns = 10;
const command = 'true';

async function main(): Promise<void> {
  const unavailable = TestSshd.unavailableReason();
  if (unavailable !== undefined) {
    console.log(`skipped: ${unavailable}`);
    return;
  }
  const sshd = await TestSshd.start();
  const temp = await openTempJournal();
  try {
    const vaultDir = join(temp.dir.path, 'vault');
    mkdirSync(vaultDir, { mode: 0o700 });
    const vault = await openVault({ dataDir: vaultDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await vault.init(Buffer.from('bench passphrase'));
    await vault.add({
      name: 'lab-key',
      kind: 'ssh_key',
      secret: Buffer.from(sshd.userKey.privateKey),
      bindings: ['lab'],
    });
    const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
    const channel = new SshChannel({ gate: temp.journal, clock: systemClock, knownHostsDir: temp.dir.path, vault });
    const config = sshHostsConfig([
      { port: sshd.port, user: sshd.user, credential: 'lab-key', hostKey: [sshd.hostKey.fingerprint] },
    ]);
    const queue = ApprovalQueue.open({ journal: temp.journal, clock: systemClock, config });
    const deps = {
      ids: createRandomIdSource(systemClock),
      clock: systemClock,
      journal: temp.journal,
      results,
      vault,
      config,
      channel,
      queue,
    };
    const viaBroker = async (): Promise<void> => {
      const { envelope } = await executeSshAction(deps, { host: 'lab', command });
      if (envelope.error !== undefined) throw new Error(`broker run failed: ${envelope.error.code}`);
    };
    const direct = (): Promise<void> => directExec(sshd.port, sshd.user, sshd.userKey.privateKey);
    // Interleaved (direct, broker, direct, …) so sshd's own drift hits both sides alike.
    const { directMs, brokerMs } = await measureInterleaved(direct, viaBroker);
    results.close();
    await vault.close();
    console.log(
      `machine: ${cpus().length} vCPU ${cpus()[0]?.model.trim() ?? ''}, Node ${process.version}; OpenSSH sshd on 127.0.0.1, ed25519 keys, command \`${command}\``,
    );
    console.log(
      `policy: one connection per action (no reuse); ${runs} runs per side, interleaved, after ${warmupRuns} warm-up pairs`,
    );
    console.log('');
    console.log('| path | p50 ms | p99 ms | mean ms |');
    console.log('| --- | --- | --- | --- |');
    console.log(
      `| ssh2 directly (connect + exec + exit/close) | ${fmt(pct(directMs, 50))} | ${fmt(pct(directMs, 99))} | ${fmt(mean(directMs))} |`,
    );
    console.log(
      `| broker executeSshAction (vault + journal + result) | ${fmt(pct(brokerMs, 50))} | ${fmt(pct(brokerMs, 99))} | ${fmt(mean(brokerMs))} |`,
    );
    console.log(
      `| added by the broker | ${fmt(pct(brokerMs, 50) - pct(directMs, 50))} | ${fmt(pct(brokerMs, 99) - pct(directMs, 99))} | ${fmt(mean(brokerMs) - mean(directMs))} |`,
    );
  } finally {
    await temp.dispose();
    await sshd.dispose();
  }
}

async function measureInterleaved(
  direct: () => Promise<void>,
  broker: () => Promise<void>,
): Promise<{ directMs: number[]; brokerMs: number[] }> {
  for (let i = 0; i < warmupRuns; i += 1) {
    await direct();
    await broker();
  }
  const directMs: number[] = [];
  const brokerMs: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    directMs.push(await timed(direct));
    brokerMs.push(await timed(broker));
  }
  return { directMs, brokerMs };
}

async function timed(op: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await op();
  return performance.now() - t0;
}

function directExec(port: number, username: string, privateKey: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.on('error', reject);
    client.on('ready', () => {
      client.exec(command, (error, stream) => {
        if (error !== undefined) return reject(error);
        stream.on('close', () => {
          client.end();
          resolve();
        });
        stream.resume();
      });
    });
    client.connect({ host: '127.0.0.1', port, username, privateKey, readyTimeout: 10_000 });
  });
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
}

function fmt(ms: number): string {
  return ms.toFixed(2);
}

await main();
