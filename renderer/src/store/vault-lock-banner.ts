import type { BrokerStatus } from '../../../broker/contract/index.js';

const reasonText: Record<NonNullable<BrokerStatus['vault']['last_lock']>['reason'], (minutes: number) => string> = {
  idle: (minutes) => `idle ${minutes} min`,
  operator: () => 'locked by an operator',
  shutdown: () => 'broker shutting down',
  other: () => 'locked',
};

/**
 * The status banner's words when the vault is locked and this broker locked it ("Vault locked (idle
 * 15 min)"): a lock is never silent. Null while unlocked, or locked since start (nothing happened to announce).
 */
export function vaultLockBanner(vault: BrokerStatus['vault']): string | null {
  if (vault.state !== 'locked' || vault.last_lock === null) return null;
  return `Vault locked (${reasonText[vault.last_lock.reason](vault.auto_lock_minutes)})`;
}
