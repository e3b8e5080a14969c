import type { Logger } from 'pino';
import { vaultLockReasons, type BrokerStatus, type VaultLockReason } from '../contract/index.js';
import type { PosternConfig } from '../config/index.js';
import type { Clock, CredentialInfo } from '../ports/index.js';
import type { Vault } from '../vault/index.js';

export type LastVaultLock = NonNullable<BrokerStatus['vault']['last_lock']>;

/**
 * Every lock is announced, never silent: a log line and the last lock kept for `status` (and so the
 * UI's banner). The vault's reason is a free string at the port; only the closed set leaves here.
 */
export function announceVaultLocks(
  vault: Vault,
  clock: Clock,
  logger: Logger,
): { lastLock(): LastVaultLock | null; stop(): void } {
  let last: LastVaultLock | null = null;
  const stop = vault.onLock((raw) => {
    const reason: VaultLockReason = (vaultLockReasons as readonly string[]).includes(raw)
      ? (raw as VaultLockReason)
      : 'other';
    last = { at_ms: clock.nowMs(), reason };
    // warn: an unattended lock stops every credentialed call until a person unlocks (the default level is warn).
    logger.warn({ reason }, 'vault locked');
  });
  return { lastLock: () => last, stop };
}

export interface MissingCredentials {
  readonly routes: readonly string[];
  readonly ssh_hosts: readonly string[];
}

/** Routes and SSH hosts naming a credential the vault does not hold (by name; names are readable while locked). */
export function findMissingCredentials(
  config: PosternConfig,
  credentials: readonly CredentialInfo[],
): MissingCredentials {
  const held = new Set(credentials.map((info) => info.name));
  return {
    routes: [...config.routes.values()].filter((route) => !held.has(route.credential)).map((route) => route.name),
    ssh_hosts: [...config.sshHosts.values()].filter((host) => !held.has(host.credential)).map((host) => host.name),
  };
}

/**
 * One warning per route or host whose credential is missing, at start and again at each unlock
 * (a person may have added it meanwhile). Names from the person's own postern.yaml, never a value.
 */
export function warnMissingCredentials(config: PosternConfig, vault: Vault, logger: Logger): () => void {
  const check = (): void => {
    const missing = findMissingCredentials(config, vault.list());
    for (const route of missing.routes) {
      logger.warn(
        { route, credential: config.routes.get(route)?.credential },
        'route names a credential the vault does not hold',
      );
    }
    for (const host of missing.ssh_hosts) {
      logger.warn(
        { ssh_host: host, credential: config.sshHosts.get(host)?.credential },
        'ssh host names a credential the vault does not hold',
      );
    }
  };
  check();
  return vault.onUnlock(check);
}
