import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { systemClock } from '../../broker/ports/index.js';
import { openVault } from '../../broker/vault/index.js';
import { startDaemon, type RunningDaemon } from './postern-process.js';
import { acceptConfigAsPerson } from './accepted-config.js';

/** A real daemon with one route `docs` (bearer, approval none) to a 127.0.0.1 target, its vault unlocked at start. */
export interface BearerRouteDaemon {
  readonly scratch: string;
  readonly dataDir: string;
  readonly daemon: RunningDaemon;
  /** The vault's passphrase (test only): what a person types at the unlock. */
  readonly passphrase: string;
  /** Stops the daemon and the target, and removes the scratch directory. */
  stop(): Promise<void>;
}

/**
 * The set-up several agent-facing tests share: a vault holding `canary` as the bearer credential `docs-token`
 * (bound to the route and 127.0.0.1), a target answering with `respond`, session approval by observe policy. The daemon
 * starts locked and is unlocked as a person does it (over control.sock, not from a passphrase file), so the passphrase
 * proves a person for `decideAsPerson`.
 */
export async function startBearerRouteDaemon(options: {
  prefix: string;
  canary: string;
  respond: RequestListener;
  /** The route's approval mode (default none) and extra `agents:` lines (e.g. `  progress_heartbeat_ms: 300`). */
  approval?: 'none' | 'per_call';
  agents?: readonly string[];
  /** More `postern daemon` options (a test knob such as `--test-drain-ms N`). */
  args?: readonly string[];
  /** More vault credentials (e.g. an `ssh_key`) and top-level postern.yaml lines after `routes:` (e.g. `ssh_hosts:`). */
  credentials?: readonly Parameters<Awaited<ReturnType<typeof openVault>>['add']>[0][];
  yaml?: readonly string[];
  /** More environment for the daemon (e.g. `POSTERN_LOG_LEVEL`). */
  env?: Record<string, string>;
}): Promise<BearerRouteDaemon> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), options.prefix));
  const dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const passphrase = `${options.prefix} passphrase (test only)`;
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'docs-token',
    kind: 'bearer',
    secret: Buffer.from(options.canary),
    bindings: ['docs', '127.0.0.1'],
  });
  for (const credential of options.credentials ?? []) await vault.add(credential);
  await vault.close();
  const passphraseFile = path.join(scratch, 'pass');
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const target: Server = createServer(options.respond);
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const port = (target.address() as AddressInfo).port;
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      'agents:',
      '  session_approval: observe',
      ...(options.agents ?? []),
      'routes:',
      '  - name: docs',
      `    base_url: http://127.0.0.1:${port}`,
      '    credential: docs-token',
      '    injection: bearer',
      `    approval: ${options.approval ?? 'none'}`,
      ...(options.yaml ?? []),
      '',
    ].join('\n'),
  );
  await acceptConfigAsPerson(dataDir, passphraseFile);
  // Unlocked as a person does it (over control.sock): the operator UI's sessions decide once they present it.
  const daemon = await startDaemon(dataDir, {
    ...(options.args === undefined ? {} : { args: options.args }),
    ...(options.env === undefined ? {} : { env: options.env }),
    person: { passphrase },
  });
  return {
    scratch,
    dataDir,
    daemon,
    passphrase,
    stop: async () => {
      await daemon.process.stop('SIGTERM');
      await new Promise<void>((resolve) => target.close(() => resolve()));
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
