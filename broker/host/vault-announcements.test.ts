import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault } from '../vault/index.js';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { createOperatorHandlers } from './operator-handlers.js';

const passphrase = 'announce vault passphrase';
const canary = 'CANARY-announce-5b1f0e';
const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1 };

let dir: TempDir | undefined;
let runtime: BrokerRuntime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  dir?.remove();
  dir = undefined;
});

/** A vault holding `docs-token` only; postern.yaml names it, a missing `api-token` and a missing `deploy-key`. */
async function dataDir(yamlExtra: string[]): Promise<string> {
  const temp = createTempDir('pva-');
  dir = temp;
  const vault = await openVault({ dataDir: temp.path, clock: new FakeClock(), kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({ name: 'docs-token', kind: 'bearer', secret: Buffer.from(canary), bindings: ['docs.example.test'] });
  await vault.close();
  writeFileSync(
    path.join(temp.path, 'postern.yaml'),
    [
      'version: 1',
      ...yamlExtra,
      'routes:',
      '  - { name: docs, base_url: "https://docs.example.test", credential: docs-token, injection: bearer }',
      '  - { name: api, base_url: "https://api.example.test", credential: api-token, injection: header, approval: none }',
      'ssh_hosts:',
      '  - { name: build, host: 10.0.0.5, user: deploy, credential: deploy-key, host_key: accept_new }',
      '',
    ].join('\n'),
  );
  return temp.path;
}

const logged = (lines: string[]): Array<Record<string, unknown>> =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>);

describe('vault.auto_lock_minutes', () => {
  it('is read from postern.yaml: default 15, 0 = never, a negative or fractional value refused naming the field', () => {
    expect(parseConfig('version: 1\n').vault).toEqual({ auto_lock_minutes: 15 });
    expect(parseConfig('version: 1\nvault: { auto_lock_minutes: 0 }\n').vault).toEqual({ auto_lock_minutes: 0 });
    expect(() => parseConfig('version: 1\nvault: { auto_lock_minutes: -1 }\n')).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'vault.auto_lock_minutes' }),
    );
    expect(() => parseConfig('version: 1\nvault: { auto_lock_minutes: 1.5 }\n')).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'vault.auto_lock_minutes' }),
    );
    expect(() => parseConfig('version: 1\nvault: { auto_lock: 3 }\n')).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID' }),
    );
  });

  it('locks the vault after the configured idle time by the clock, and the lock is logged and in status with its reason', async () => {
    const clock = new FakeClock();
    const { logger, lines } = createCapturedLogger();
    runtime = await createBrokerRuntime({
      dataDir: await dataDir(['vault: { auto_lock_minutes: 2 }']),
      ...options,
      clock,
      logger,
      vaultPassphrase: Buffer.from(passphrase),
    });
    expect(runtime.status().vault).toEqual({ state: 'unlocked', auto_lock_minutes: 2, last_lock: null });

    clock.advance(2 * 60_000 - 1);
    expect(runtime.status().vault.state).toBe('unlocked');
    clock.advance(1);
    expect(runtime.status().vault).toEqual({
      state: 'locked',
      auto_lock_minutes: 2,
      last_lock: { at_ms: clock.nowMs(), reason: 'idle' },
    });
    expect(logged(lines).filter((line) => line['msg'] === 'vault locked')).toEqual([
      expect.objectContaining({ level: 40, reason: 'idle' }),
    ]);
    expect(lines.join('')).not.toContain(canary);
  });

  it('with 0 never locks by itself; a person’s lock is announced as operator', async () => {
    const clock = new FakeClock();
    const { logger, lines } = createCapturedLogger();
    runtime = await createBrokerRuntime({
      dataDir: await dataDir(['vault: { auto_lock_minutes: 0 }']),
      ...options,
      clock,
      logger,
      vaultPassphrase: Buffer.from(passphrase),
    });
    clock.advance(7 * 24 * 3_600_000);
    expect(runtime.status().vault).toEqual({ state: 'unlocked', auto_lock_minutes: 0, last_lock: null });
    const handlers = createOperatorHandlers(runtime.broker);
    expect(await handlers['vault.lock']({}, { surface: 'desktop', auth: 'desktop_window' })).toMatchObject({
      ok: true,
      value: { state: 'locked' },
    });
    expect(runtime.status().vault.last_lock).toEqual({ at_ms: clock.nowMs(), reason: 'operator' });
    expect(
      logged(lines)
        .filter((line) => line['msg'] === 'vault locked')
        .map((line) => line['reason']),
    ).toEqual(['operator']);
  });
});

describe('a route or host naming a credential the vault does not hold', () => {
  it('is a warning at start (vault locked: names are readable) and again at unlock, and flagged in config.show', async () => {
    const { logger, lines } = createCapturedLogger();
    runtime = await createBrokerRuntime({ dataDir: await dataDir([]), ...options, clock: new FakeClock(), logger });
    expect(runtime.status().vault.state).toBe('locked');
    const warnings = (): Array<Record<string, unknown>> =>
      logged(lines).filter((line) => String(line['msg']).includes('credential the vault does not hold'));
    expect(warnings()).toEqual([
      expect.objectContaining({ level: 40, route: 'api', credential: 'api-token' }),
      expect.objectContaining({ level: 40, ssh_host: 'build', credential: 'deploy-key' }),
    ]);

    const handlers = createOperatorHandlers(runtime.broker);
    const caller = { surface: 'desktop', auth: 'desktop_window' } as const;
    await handlers['vault.unlock']({ passphrase }, caller);
    expect(warnings()).toHaveLength(4);

    const shown = await handlers['config.show']({}, caller);
    if (!shown.ok) throw new Error(shown.error.code);
    expect(shown.value.routes.map((route) => [route.name, route.credential_missing])).toEqual([
      ['docs', false],
      ['api', true],
    ]);
    expect(shown.value.ssh_hosts.map((host) => [host.name, host.credential_missing])).toEqual([['build', true]]);
    expect(lines.join('')).not.toContain(canary);
  });
});
