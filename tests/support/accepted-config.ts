import { readFileSync } from 'node:fs';
import path from 'node:path';
import { acceptConfigFile, sealConfigAtVaultCreation } from '../../broker/host/index.js';
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

/**
 * What a person's `postern vault init` at a terminal does (fast KDF, test only): creates the vault and trusts the
 * postern.yaml present at that moment on first use (sealConfigAtVaultCreation: no file seals the empty configuration).
 * Write the file first: a file written after the vault exists is a card a person accepts (acceptConfigAsPerson).
 */
export async function createVaultAsPerson(
  dataDir: string,
  passphrase: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  try {
    await vault.init(Buffer.from(passphrase));
    const sealed = sealConfigAtVaultCreation({ dataDir, vault, clock: systemClock, env });
    if (!sealed.sealed) throw new Error(`the configuration was not trusted on first use: ${sealed.reason}`);
  } finally {
    await vault.close();
  }
}
