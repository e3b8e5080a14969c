import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configPendingSchema } from '../contract/index.js';
import { emptyConfig } from '../config/index.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
import {
  acceptedConfigDirName,
  acceptedConfigFileName,
  loadConfigIntegrity,
  type ConfigIntegrity,
} from './config-integrity.js';
import { sendControlRequest, startControlSocket, type ControlSocket } from './control-socket.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import type { OperatorBroker } from './operator-broker.js';
import { createOperatorHandlers } from './operator-handlers.js';
import { createOperatorVault } from './operator-vault.js';

/**
 * config.pending with a broker running: the answer leaves as its contract (configPendingSchema) says it, whatever the
 * code that builds it returns. The real config integrity on a real data directory, the real operator handlers and
 * control socket, the CLI's client; the one thing changed is the builder's answer, drifted the way a field dropped
 * from the schema but still set by the builder would be.
 */
const canary = 'CANARY-dropped-field-3a9';
let dir: TempDir;
let lock: DataDirLock;
let vault: Vault;
let control: ControlSocket | undefined;
const clock = new FakeClock();

beforeEach(async () => {
  dir = createTempDir('pcp-');
  lock = lockDataDir(dir.path);
  vault = await openVault({ dataDir: dir.path, clock, idleLockMs: 0, kdf: 'min' });
  await vault.init(Buffer.from('config pending transit passphrase'));
});
afterEach(async () => {
  await control?.close();
  control = undefined;
  await vault.close();
  lock.release();
  dir.remove();
});

/** The control socket serving the operator methods over `integrity`; every log line kept. */
async function serve(integrity: ConfigIntegrity): Promise<{ path: string; lines: string[] }> {
  const { logger, lines } = createCapturedLogger();
  const ops = createOperatorVault({ dataDir: dir.path, vault, config: emptyConfig(), integrity, clock, logger });
  const handlers = createOperatorHandlers(ops as unknown as OperatorBroker);
  control = await startControlSocket({ dataDir: dir.path, vault, clock, handlers });
  return { path: control.path, lines };
}

describe('config.pending over the control socket', () => {
  it('strips a field its schema does not name, at the top and inside, before the answer leaves', async () => {
    const real = loadConfigIntegrity({ dataDir: dir.path, clock });
    const drifted: ConfigIntegrity = {
      ...real,
      pending: () => {
        const pending = real.pending();
        return {
          ...pending,
          dropped_field: canary,
          accepted: { at_ms: 1, by: 'person:alice', how: 'accepted', digest: 'sha256:x', dropped_inside: canary },
        } as ReturnType<ConfigIntegrity['pending']>;
      },
    };
    const { path } = await serve(drifted);
    const reply = await sendControlRequest(path, { op: 'api', method: 'config.pending', input: {} });
    expect(reply.ok).toBe(true);
    expect(JSON.stringify(reply)).not.toContain(canary);
    expect(reply).toEqual({ ok: true, value: configPendingSchema.parse(drifted.pending()) });
    expect(reply).toMatchObject({ ok: true, value: { trust: real.pending().trust, accepted: { by: 'person:alice' } } });
  });

  it('an answer that does not fit its contract is not sent: INTERNAL, logged without its values', async () => {
    const real = loadConfigIntegrity({ dataDir: dir.path, clock });
    const broken: ConfigIntegrity = {
      ...real,
      pending: () => ({ ...real.pending(), trust: canary }) as unknown as ReturnType<ConfigIntegrity['pending']>,
    };
    const { path, lines } = await serve(broken);
    const reply = await sendControlRequest(path, { op: 'api', method: 'config.pending', input: {} });
    expect(reply).toMatchObject({ ok: false, error: { code: 'INTERNAL' } });
    expect(JSON.stringify(reply)).not.toContain(canary);
    expect(lines.join('\n')).toContain('config.pending: the answer does not fit its contract');
    expect(lines.join('\n')).not.toContain(canary);
  });

  // The file and the accepted copy are the agent's to write (THREAT-MODEL: same user): neither may make the answer
  // overflow its contract, or the person loses the card exactly when it matters.
  it('a postern.yaml whose error names a thousand-character key shows the error cut with a marker, not INTERNAL', async () => {
    const { path: socket } = await serve(loadConfigIntegrity({ dataDir: dir.path, clock }));
    // Written while the broker runs (a file that does not load stops a start instead).
    writeFileSync(path.join(dir.path, 'postern.yaml'), `version: 1\n${'k'.repeat(1000)}: 1\n`);
    const reply = await sendControlRequest(socket, { op: 'api', method: 'config.pending', input: {} });
    expect(reply).toMatchObject({ ok: true, value: { change: { invalid: { code: 'CONFIG_INVALID' } } } });
    const message = (reply as { value: { change: { invalid: { message: string } } } }).value.change.invalid.message;
    expect(message.length).toBeLessThanOrEqual(1000);
    expect(message).toMatch(
      /^the configuration: Unrecognized key: "k+… \[cut: [\d,]+ of [\d,]+ characters not shown\]$/,
    );
  });

  it('an accepted copy naming its acceptor in more characters than Postern seals is not ours: untrusted, and the card answers', async () => {
    mkdirSync(path.join(dir.path, acceptedConfigDirName), { recursive: true });
    const forged = { version: 1, text: '', accepted_at_ms: 1, accepted_by: 'a'.repeat(5000), how: 'accepted' };
    writeFileSync(
      path.join(dir.path, acceptedConfigDirName, acceptedConfigFileName),
      JSON.stringify({ ...forged, key: 'AAAA', mac: 'ab'.repeat(32) }),
    );
    const { path: socket } = await serve(loadConfigIntegrity({ dataDir: dir.path, clock }));
    const reply = await sendControlRequest(socket, { op: 'api', method: 'config.pending', input: {} });
    expect(reply).toMatchObject({
      ok: true,
      value: { trust: 'untrusted', untrusted_reason: 'the accepted copy is not in the expected shape', accepted: null },
    });
  });
});
