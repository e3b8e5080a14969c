import { readFileSync } from 'node:fs';
import path from 'node:path';
import { acceptConfigFile } from '../../broker/host/index.js';
import { digestOf } from '../../broker/host/config-integrity.js';
import { systemClock } from '../../broker/ports/index.js';
import { openVault } from '../../broker/vault/index.js';

/**
 * The setup step a person does once before a broker starts with credentials in the vault: accept
 * postern.yaml as it is now (what `postern config accept <digest>` does with no broker running).
 * Without it the broker refuses every route until a person accepts the file (docs/config.md).
 */
export async function acceptConfigAsPerson(dataDir: string, passphraseFile: string): Promise<void> {
  const passphrase = readFileSync(passphraseFile, 'utf8').replace(/\n$/, '');
  const text = readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8');
  const vault = await openVault({ dataDir, clock: systemClock, idleLockMs: 0 });
  try {
    await vault.unlock(Buffer.from(passphrase));
    acceptConfigFile({
      dataDir,
      vault,
      clock: systemClock,
      actor: { kind: 'person', id: 'test-setup', surface: 'cli', auth: 'vault_passphrase_tty' },
      digest: digestOf(text),
    });
  } finally {
    await vault.close();
  }
}
