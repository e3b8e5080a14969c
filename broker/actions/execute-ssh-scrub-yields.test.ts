import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSshActionHarness, sshHostsConfig, type SshActionHarness } from '../testing/ssh-action-harness.js';
import { TestSshd } from '../testing/test-sshd.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';
import { watchEventLoop, watchEventLoopQuietest } from '../testing/event-loop-gaps.js';

/**
 * THREAT-MODEL 4 on the SSH path: a command that prints a megabyte of hostile binary (random bytes with a zlib header
 * look-alike every 64 bytes, each costing the scrubber decoder calls up to its per-input budget) must not stall the
 * event loop while its output is scrubbed. Same measure as execute-http-scrub-yields.test.ts (which says why the
 * numbers hold on a loaded CI box): the output's sync scrub takes more than 200 ms, and while the action runs under a
 * 1 ms ticker no gap between ticks reaches 100 ms. With the sync scrub of the output put back, the gap is the scrub.
 */
const unavailable = TestSshd.unavailableReason();
let sshd: TestSshd | undefined;
let h: SshActionHarness;
let dir: string;
let blob: Buffer;

beforeAll(async () => {
  if (unavailable !== undefined) {
    console.warn(`real-sshd SSH tests skipped: ${unavailable}`);
    return;
  }
  dir = mkdtempSync(join(tmpdir(), 'postern-ssh-yield-'));
  blob = randomBytes(1024 * 1024);
  for (let i = 0; i + 1 < blob.length; i += 64) [blob[i], blob[i + 1]] = [0x78, 0x9c];
  writeFileSync(join(dir, 'blob.bin'), blob);
  sshd = await TestSshd.start();
  h = await openSshActionHarness({
    'lab-key': { privateKey: sshd.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] },
  });
}, 30_000);
afterAll(async () => {
  await sshd?.dispose();
  await h?.dispose();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('when a command prints a megabyte of hostile binary (THREAT-MODEL 4: the agent cannot wedge others)', () => {
  it('its output is scrubbed in slices: no gap between ticks comes near the scrub’s own duration', async (ctx) => {
    const s = TestSshd.required(sshd, ctx);
    const scrubber = secretScrubber(secretParts({ kind: 'ssh_key', privateKey: s.userKey.privateKey }));
    const sync = await watchEventLoop(() => Promise.resolve(scrubber.scrub(blob)));
    expect(sync.tookMs).toBeGreaterThan(200);

    const config = sshHostsConfig([
      { port: s.port, user: s.user, credential: 'lab-key', hostKey: [s.hostKey.fingerprint] },
    ]);
    // A first action compiles what every action runs; the attack is a stream of them (see the HTTP test).
    await h.run(config, { host: 'lab', command: 'echo warm' });
    // Up to three runs until one is under the bound, as in the HTTP test (a loaded box can stop the process once).
    const { value, maxGapMs } = await watchEventLoopQuietest(
      () => h.run(config, { host: 'lab', command: `cat ${join(dir, 'blob.bin')}` }),
      100,
    );
    expect(value.envelope.error).toBeUndefined();
    expect(value.output?.stdout_bytes).toBe(blob.length);
    expect(maxGapMs).toBeLessThan(100);
    expect(maxGapMs).toBeLessThan(sync.tookMs / 2);
  }, 90_000);
});
