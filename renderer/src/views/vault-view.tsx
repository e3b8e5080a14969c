import { useEffect, useId, useRef, type FormEvent, type ReactNode } from 'react';
import { useAppStore } from '../store/app-store.js';
import { vaultNextStep, type VaultNextStep } from '../store/vault-lock-banner.js';
import { vaultBlocksCredentials, type VaultView as VaultViewState } from '../store/vault-reducer.js';
import { SecretInput } from './secret-input.js';

/** The vault's bound on a passphrase (broker/contract/operator-vault-api.ts). */
const passphraseCharsMax = 1_024;

/**
 * The vault: locked → an unlock form (a secret field whose value goes straight into the call and
 * is cleared at once, never into the store or the page's state); unlocked → Lock.
 */
export function VaultView() {
  const view = useAppStore((state) => state.vaultView);
  return (
    <section className="panel" aria-labelledby="vault-heading" data-testid="vault-view">
      <header className="panel-header">
        <h2 id="vault-heading">Vault</h2>
        {view.state !== null && (
          <span className={`badge vault-${view.state}`} data-testid="vault-state">
            {view.state}
          </span>
        )}
      </header>
      <p className="muted intro">
        Credentials are sealed in <code>vault.sqlite</code>; the broker can inject them only while the vault is
        unlocked. It locks itself after a while without operator activity, and when the broker stops.
      </p>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="vault-status-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {view.state === null && view.error === null && <p className="muted">Loading…</p>}
      {view.state === 'uninitialized' && <VaultUninitialized />}
      {view.state === 'locked' && <UnlockForm busy={view.busy} />}
      {view.state === 'unlocked' && <VaultUnlocked credentials={view.credentials} busy={view.busy} />}
      {view.last !== null && <VaultCallResult last={view.last} />}
    </section>
  );
}

function UnlockForm({ busy }: { busy: VaultViewState['busy'] }) {
  const unlock = useAppStore((state) => state.unlockVault);
  const passphraseRef = useRef<HTMLInputElement>(null);
  const id = useId();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const field = passphraseRef.current;
    if (field === null || field.value === '') return;
    const passphrase = field.value;
    field.value = '';
    void unlock(passphrase);
  };

  return (
    <form className="unlock-form" onSubmit={submit} aria-label="Unlock the vault">
      <label htmlFor={id}>Vault passphrase</label>
      <SecretInput
        id={id}
        ref={passphraseRef}
        name="passphrase"
        maxLength={passphraseCharsMax}
        required
        data-testid="vault-passphrase"
      />
      <button type="submit" className="primary" disabled={busy !== null}>
        {busy === 'unlock' ? 'Unlocking…' : 'Unlock'}
      </button>
    </form>
  );
}

function VaultUnlocked({ credentials, busy }: { credentials: number; busy: VaultViewState['busy'] }) {
  const lock = useAppStore((state) => state.lockVault);
  return (
    <div className="form-actions">
      <span>
        Unlocked: {credentials} {credentials === 1 ? 'credential is' : 'credentials are'} available to approved actions.
      </span>
      <button
        type="button"
        className="danger"
        onClick={() => void lock()}
        disabled={busy !== null}
        data-testid="vault-lock"
      >
        {busy === 'lock' ? 'Locking…' : 'Lock now'}
      </button>
    </div>
  );
}

function VaultCallResult({ last }: { last: NonNullable<VaultViewState['last']> }) {
  return last.ok ? (
    <p className="call-result ok" role="status" data-testid="vault-result">
      {last.call === 'unlock' ? 'Vault unlocked.' : 'Vault locked.'}
    </p>
  ) : (
    <p className="call-result error" role="alert" data-testid="vault-result">
      <strong>{last.error.code}</strong> {last.error.message}
    </p>
  );
}

/** The data directory as the broker reported it, read once if no status is known yet (the create command names it). */
function useDataDir(): string | null {
  const dataDir = useAppStore((s) => s.statusView.status?.data_dir ?? null);
  const phase = useAppStore((s) => s.statusView.phase);
  const refreshStatus = useAppStore((s) => s.refreshStatus);
  useEffect(() => {
    if (phase === 'idle') void refreshStatus();
  }, [phase, refreshStatus]);
  return dataDir;
}

function VaultUninitialized() {
  const step = vaultNextStep({ state: 'uninitialized' }, useDataDir());
  if (step === null) return null;
  return (
    <p className="empty" data-testid="vault-uninitialized">
      No vault yet. <StepText step={step} /> Then unlock it here.
    </p>
  );
}

/** The step in words: a link for the page's own step, the terminal command for creating a vault. */
function StepText({ step }: { step: VaultNextStep }) {
  if (step.command === null) return <a href={step.href}>{step.step}</a>;
  return (
    <>
      <a href={step.href}>{step.step}</a> here, or run <code data-testid="vault-create-command">{step.command}</code> in
      a terminal (it asks for a new passphrase twice).
    </>
  );
}

/**
 * A banner with the vault's next step ("Create a vault", "Unlock"), or nothing while it is unlocked.
 * `consequence` says what the state means where the banner is shown.
 */
export function VaultStepBanner({
  step,
  testId,
  consequence,
}: {
  step: VaultNextStep | null;
  testId: string;
  consequence?: ReactNode;
}) {
  if (step === null) return null;
  return (
    <p className="hint" role="status" data-testid={testId} data-state={step.state}>
      <strong>{step.headline}</strong>
      {consequence} — <StepText step={step} />
      {step.command !== null && ' Then unlock it on the Vault tab.'}
    </p>
  );
}

/** Shown above the approval cards while no credential can be injected. */
export function VaultLockedHint() {
  const state = useAppStore((s) => s.vaultView.state);
  const dataDir = useDataDir();
  if (!vaultBlocksCredentials(state) || state === null) return null;
  return (
    <VaultStepBanner
      step={vaultNextStep({ state }, dataDir)}
      testId="vault-locked-hint"
      consequence={
        <>
          : an approved action that needs a credential ends <code>VAULT_LOCKED</code> (not attempted), so take this step
          before approving
        </>
      }
    />
  );
}
