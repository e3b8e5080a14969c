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

/**
 * The next step for the vault's state, the one banner helper every view uses (Status, Approvals,
 * Vault): "Create a vault" (a terminal command: it asks for a new passphrase twice) while there is
 * none, "Unlock" while it is locked (naming why, when this broker locked it), nothing while unlocked.
 */
export interface VaultNextStep {
  state: 'uninitialized' | 'locked';
  /** What holds now, e.g. "No vault yet" or "Vault locked (idle 15 min)". */
  headline: string;
  /** The step's label, e.g. "Create a vault" or "Unlock". */
  step: string;
  /** The terminal command that takes the step, when it is one. */
  command: string | null;
  /** Where the page takes the step. */
  href: string;
}

type VaultFacts = Pick<BrokerStatus['vault'], 'state'> &
  Partial<Pick<BrokerStatus['vault'], 'last_lock' | 'auto_lock_minutes'>>;

export function vaultNextStep(vault: VaultFacts, dataDir?: string | null): VaultNextStep | null {
  if (vault.state === 'uninitialized') {
    const command =
      dataDir === undefined || dataDir === null
        ? 'postern vault init'
        : `postern vault init --data-dir ${shellWord(dataDir)}`;
    return {
      state: 'uninitialized',
      headline: 'No vault yet: no credential can be injected',
      step: 'Create a vault',
      command,
      href: '#/welcome',
    };
  }
  if (vault.state !== 'locked') return null;
  const { last_lock: lastLock, auto_lock_minutes: minutes } = vault;
  const announced =
    lastLock === undefined || minutes === undefined
      ? null
      : vaultLockBanner({ state: 'locked', last_lock: lastLock, auto_lock_minutes: minutes });
  return { state: 'locked', headline: announced ?? 'Vault locked', step: 'Unlock', command: null, href: '#/vault' };
}

/** A path as one shell word: quoted only when it needs it, so the line can be pasted as it is. */
function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
