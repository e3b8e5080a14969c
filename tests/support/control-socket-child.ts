/**
 * Child process for tests/control-socket-cap.test.ts: `node --import tsx tests/support/control-socket-child.ts <dataDir>
 * <passphrase>`. A broker's control socket on its own event loop, as a daemon's is: it locks the data directory, creates
 * a vault (fast KDF, locked), listens on `control.sock` and prints `ready`. It stops when its stdin closes (the parent
 * ended or died), so an orphan does not outlive the test.
 */
import { lockDataDir } from '../../broker/host/data-dir-lock.js';
import { startControlSocket } from '../../broker/host/control-socket.js';
import { systemClock } from '../../broker/ports/index.js';
import { openVault } from '../../broker/vault/index.js';

async function main(): Promise<void> {
  const [dataDir, passphrase] = process.argv.slice(2);
  if (dataDir === undefined || passphrase === undefined)
    throw new Error('usage: control-socket-child.ts <dataDir> <passphrase>');
  const lock = lockDataDir(dataDir);
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  vault.lock('test setup');
  const control = await startControlSocket({ dataDir, vault });
  process.stdout.write('ready\n');
  process.stdin.resume();
  await new Promise<void>((resolve) => process.stdin.once('close', () => resolve()));
  await control.close();
  await vault.close();
  lock.release();
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
