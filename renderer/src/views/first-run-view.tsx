import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode, type RefObject } from 'react';
import { useAppStore } from '../store/app-store.js';
import {
  firstRun,
  isFreshDataDir,
  passphraseStrength,
  type FirstRunFacts,
  type FirstRunStep,
  type FirstRunStepId,
  type PassphraseStrength,
} from '../store/first-run.js';
import { actionHref, tabOrigin } from '../store/hash-route.js';
import { AddCredentialForm } from './credentials-view.js';
import { AddRouteForm } from './add-route-form.js';
import { AddSshHostForm } from './add-ssh-host-form.js';
import { usePolling } from './use-polling.js';
import { SecretInput } from './secret-input.js';

/** The vault's bound on a passphrase (broker/contract/operator-vault-api.ts passphraseCharsMax). */
const passphraseCharsMax = 1_024;
/** How often the guide re-reads the newest action while its push channel is down (a notice re-reads it at once). */
export const firstActionRefreshMs = 2_000;
/** The configuration has no change topic of its own; a notice about the vault (created, unlocked) re-reads it. */
const configRefreshMs = 5_000;
const activityTopics = ['activity'] as const;
const vaultTopics = ['vault'] as const;
/** Where "skip the guide" is remembered across reloads in this browser or window. */
const dismissedKey = 'postern.firstRun.dismissed';

/** The facts the steps are computed from, read from the slices the shell keeps current. */
function useFirstRunFacts(): FirstRunFacts {
  // Primitives only: a selector that builds an object answers a new one every time, and React renders forever.
  const vaultState = useAppStore((s) => s.vaultView.state);
  const credentials = useAppStore((s) => s.vaultView.credentials);
  const vault = vaultState === null ? null : { state: vaultState, credentials };
  const config = useAppStore((s) => s.configView.config);
  const edited = useAppStore((s) => s.configView.edited);
  const sessions = useAppStore((s) => s.sessionsView.sessions.length);
  const { firstAction, hookupCopied, skipped } = useAppStore((s) => s.firstRunView);
  const written =
    edited?.ok === true && edited.file.applies === 'next_start'
      ? edited.file.routes.length + edited.file.ssh_hosts.length
      : null;
  return { vault, config, writtenForNextStart: written, sessions, firstAction, hookupCopied, skipped };
}

/**
 * The guided first run at #/welcome: each step says what holds and what comes next, can be skipped,
 * and is computed from the broker's state (store/first-run.ts), so a step taken elsewhere is done here.
 */
export function FirstRunView() {
  const facts = useFirstRunFacts();
  const run = firstRun(facts);
  const [open, setOpen] = useState<FirstRunStepId | null>(null);
  const refreshConfig = useAppStore((s) => s.refreshConfig);
  const refreshFirstAction = useAppStore((s) => s.refreshFirstAction);
  const refreshVault = useAppStore((s) => s.refreshVault);
  usePolling(refreshConfig, configRefreshMs, vaultTopics);
  usePolling(refreshFirstAction, firstActionRefreshMs, activityTopics);
  // Adding a credential publishes no vault notice; the step reads the vault's count, so read it again.
  const credentialCount = useAppStore((s) => s.credentialsView.credentials.length);
  useEffect(() => {
    void refreshVault();
  }, [credentialCount, refreshVault]);
  const openStep = open !== null && run.steps.find((step) => step.id === open)?.state !== 'done' ? open : null;
  const expanded = openStep ?? run.current;
  return (
    <section className="panel first-run" aria-labelledby="first-run-heading" data-testid="first-run">
      <header className="panel-header">
        <h2 id="first-run-heading">First run</h2>
        <span className="muted">
          {run.steps.filter((step) => step.state === 'done').length} of {run.steps.length} done
        </span>
      </header>
      <p className="muted intro">
        Five steps from an empty data directory to an agent&apos;s first call through Postern. Nothing here blocks the
        other tabs; every step can be taken there too, and this guide stays at <a href="#/welcome">#/welcome</a>.
      </p>
      <p className="first-run-next" role="status" data-testid="first-run-next">
        {run.next}
      </p>
      <ol className="first-run-steps">
        {run.steps.map((step, index) => (
          <StepItem
            key={step.id}
            step={step}
            index={index}
            expanded={step.id === expanded || (step.id === 'first_call' && step.state === 'done')}
            onOpen={setOpen}
          />
        ))}
      </ol>
    </section>
  );
}

function StepItem({
  step,
  index,
  expanded,
  onOpen,
}: {
  step: FirstRunStep;
  index: number;
  expanded: boolean;
  onOpen(id: FirstRunStepId | null): void;
}) {
  const skip = useAppStore((s) => s.skipFirstRunStep);
  const unskip = useAppStore((s) => s.unskipFirstRunStep);
  const label =
    step.state === 'done' ? 'done' : step.state === 'current' ? 'now' : step.state === 'skipped' ? 'skipped' : 'to do';
  return (
    <li
      className={`first-run-step ${step.state}`}
      data-testid={`first-run-step-${step.id}`}
      data-state={step.state}
      aria-current={step.state === 'current' ? 'step' : undefined}
    >
      <div className="first-run-step-head">
        <span className="first-run-step-number" aria-hidden="true">
          {step.state === 'done' ? '✓' : index + 1}
        </span>
        <h3>{step.title}</h3>
        <span className={`badge first-run-${step.state}`}>{label}</span>
      </div>
      <p className="muted" data-testid={`first-run-step-${step.id}-status`}>
        {step.status}
      </p>
      {expanded && step.state !== 'done' && <StepBody id={step.id} />}
      {step.id === 'first_call' && step.state === 'done' && <FirstCallBody />}
      <div className="form-actions">
        {!expanded && step.state === 'todo' && (
          <button type="button" onClick={() => onOpen(step.id)}>
            Do this now
          </button>
        )}
        {expanded && step.state !== 'done' && step.state !== 'skipped' && (
          <button type="button" onClick={() => (skip(step.id), onOpen(null))} data-testid={`first-run-skip-${step.id}`}>
            Skip this step
          </button>
        )}
        {step.state === 'skipped' && (
          <button type="button" onClick={() => (unskip(step.id), onOpen(step.id))}>
            Take it now
          </button>
        )}
      </div>
    </li>
  );
}

function StepBody({ id }: { id: FirstRunStepId }) {
  switch (id) {
    case 'vault':
      return <VaultStep />;
    case 'credential':
      return <CredentialStep />;
    case 'route':
      return <RouteStep />;
    case 'hookup':
      return <HookupStep />;
    case 'first_call':
      return <FirstCallBody />;
  }
}

function VaultStep() {
  const state = useAppStore((s) => s.vaultView.state);
  if (state === 'locked') {
    return (
      <p className="hint">
        A vault already exists in this data directory. Unlock it on the <a href="#/vault">Vault</a> tab. If you did not
        create it, stop here: whoever knows its passphrase can read every credential added to it (docs/vault.md).
      </p>
    );
  }
  return <CreateVaultForm />;
}

/**
 * Two secret fields (secret-input.tsx) whose values never enter React state or the store: only the strength hint of
 * the first is kept while typing; both are read once on submit and cleared at that moment.
 */
function CreateVaultForm() {
  const creating = useAppStore((s) => s.firstRunView.creating);
  const created = useAppStore((s) => s.firstRunView.created);
  const createVault = useAppStore((s) => s.createVault);
  const refreshVault = useAppStore((s) => s.refreshVault);
  const firstRef = useRef<HTMLInputElement>(null);
  const againRef = useRef<HTMLInputElement>(null);
  const [strength, setStrength] = useState(() => passphraseStrength(''));
  const [mismatch, setMismatch] = useState(false);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const first = firstRef.current;
    const again = againRef.current;
    if (first === null || again === null || first.value === '') return;
    const passphrase = first.value;
    const same = passphrase === again.value;
    first.value = '';
    again.value = '';
    setStrength(passphraseStrength(''));
    setMismatch(!same);
    if (!same) return;
    void createVault(passphrase).then(async (ok) => {
      if (ok) await refreshVault();
    });
  };
  return (
    <form
      className="credential-form"
      onSubmit={submit}
      aria-label="Create the vault"
      data-testid="first-run-create-vault"
    >
      <p className="muted">
        The passphrase seals every credential; Postern cannot recover it. Type it twice. The vault is created unlocked,
        and locks itself after a while without activity.
      </p>
      <fieldset disabled={creating}>
        <PassphraseFields firstRef={firstRef} againRef={againRef} strength={strength} setStrength={setStrength} />
        <div className="form-actions">
          <button type="submit" className="primary">
            {creating ? 'Creating…' : 'Create the vault'}
          </button>
        </div>
      </fieldset>
      {mismatch && (
        <p className="call-result error" role="alert" data-testid="first-run-vault-result">
          The two passphrases differ; nothing was created. Type them again.
        </p>
      )}
      {!mismatch && created !== null && !created.ok && (
        <p className="call-result error" role="alert" data-testid="first-run-vault-result">
          <strong>{created.error.code}</strong> {created.error.message}
        </p>
      )}
    </form>
  );
}

/** The passphrase twice, in uncontrolled fields the form reads through the refs; typing updates only the strength hint. */
function PassphraseFields({
  firstRef,
  againRef,
  strength,
  setStrength,
}: {
  firstRef: RefObject<HTMLInputElement | null>;
  againRef: RefObject<HTMLInputElement | null>;
  strength: ReturnType<typeof passphraseStrength>;
  setStrength(strength: ReturnType<typeof passphraseStrength>): void;
}) {
  const id = useId();
  return (
    <>
      <div className="field">
        <label htmlFor={`${id}-passphrase`}>New vault passphrase</label>
        <SecretInput
          id={`${id}-passphrase`}
          ref={firstRef}
          maxLength={passphraseCharsMax}
          required
          onInput={(e) => setStrength(passphraseStrength(e.currentTarget.value))}
          data-testid="first-run-passphrase"
        />
        <StrengthHint strength={strength.strength}>{strength.hint}</StrengthHint>
      </div>
      <div className="field">
        <label htmlFor={`${id}-again`}>The same passphrase again</label>
        <SecretInput
          id={`${id}-again`}
          ref={againRef}
          maxLength={passphraseCharsMax}
          required
          data-testid="first-run-passphrase-again"
        />
      </div>
    </>
  );
}

function StrengthHint({ strength, children }: { strength: PassphraseStrength; children: ReactNode }) {
  return (
    <span className={`first-run-strength ${strength}`} data-testid="first-run-strength" data-strength={strength}>
      {children}
    </span>
  );
}

function CredentialStep() {
  const state = useAppStore((s) => s.vaultView.state);
  return (
    <>
      <p className="muted">
        Bind it to the host your route will call (for example <code>api.example.com</code> or{' '}
        <code>127.0.0.1:8080</code>): the broker sends it nowhere else. Its secret goes into the vault and is never
        shown again.
      </p>
      <AddCredentialForm locked={state !== 'unlocked'} />
    </>
  );
}

function RouteStep() {
  const [kind, setKind] = useState<'http' | 'ssh'>('http');
  return (
    <>
      <p className="muted">
        Name the credential you just added. An agent calls the route by its name; the broker adds the credential and
        sends the call to the base URL (or runs the command on the host).
      </p>
      <div className="form-actions" role="group" aria-label="Route or SSH host">
        <button type="button" aria-pressed={kind === 'http'} onClick={() => setKind('http')}>
          HTTP route
        </button>
        <button type="button" aria-pressed={kind === 'ssh'} onClick={() => setKind('ssh')}>
          SSH host
        </button>
      </div>
      {kind === 'http' ? <AddRouteForm /> : <AddSshHostForm />}
      {kind === 'ssh' && (
        <p className="muted">
          Pin the host key (<code>ssh-keyscan HOST | ssh-keygen -lf -</code> prints its SHA256 fingerprint); left empty,
          the first key seen is trusted and kept. Add the SSH key itself with{' '}
          <code>postern vault add NAME --kind ssh_key --from-stdin</code>.
        </p>
      )}
    </>
  );
}

function HookupStep() {
  const hookup = useAppStore((s) => s.firstRunView.hookup);
  const error = useAppStore((s) => s.firstRunView.hookupError);
  const refreshHookup = useAppStore((s) => s.refreshHookup);
  const markCopied = useAppStore((s) => s.markHookupCopied);
  const [client, setClient] = useState(0);
  const [copy, setCopy] = useState<'idle' | 'copied' | 'failed'>('idle');
  const textRef = useRef<HTMLPreElement>(null);
  const id = useId();
  useEffect(() => {
    void refreshHookup();
  }, [refreshHookup]);
  if (error !== null && hookup === null) {
    return (
      <p className="call-result error" role="alert">
        <strong>{error.code}</strong> {error.message} (<code>postern agent-config</code> prints the same line in a
        terminal.)
      </p>
    );
  }
  if (hookup === null) return <p className="muted">Loading…</p>;
  const chosen = hookup.clients[client] ?? hookup.clients[0];
  if (chosen === undefined) return null;
  const copyLine = () => {
    void navigator.clipboard.writeText(chosen.text).then(
      () => (setCopy('copied'), markCopied()),
      () => {
        // No clipboard (a denied permission): select the text so Ctrl+C copies it.
        const node = textRef.current;
        if (node !== null) window.getSelection()?.selectAllChildren(node);
        setCopy('failed');
      },
    );
  };
  return (
    <div className="first-run-hookup">
      <div className="field">
        <label htmlFor={`${id}-client`}>Your MCP client</label>
        <select
          id={`${id}-client`}
          value={client}
          onChange={(e) => (setClient(Number(e.target.value)), setCopy('idle'))}
          data-testid="first-run-client"
        >
          {hookup.clients.map((entry, index) => (
            <option key={entry.client} value={index}>
              {entry.client}
            </option>
          ))}
        </select>
      </div>
      <pre className="first-run-hookup-text" ref={textRef} data-testid="first-run-hookup-text">
        {chosen.text}
      </pre>
      <p className="muted">
        Where: {chosen.where}. It starts Postern&apos;s MCP shim for this broker&apos;s data directory (
        <code>{hookup.data_dir}</code>); the agent never sees a credential.
      </p>
      {hookup.note !== null && <p className="hint">{hookup.note}</p>}
      <div className="form-actions">
        <button type="button" className="primary" onClick={copyLine} data-testid="first-run-copy">
          Copy
        </button>
        {copy === 'copied' && (
          <span className="call-result ok" role="status" data-testid="first-run-copied">
            Copied. Paste it into {chosen.client}, then start the agent.
          </span>
        )}
        {copy === 'failed' && (
          <span className="call-result error" role="status" data-testid="first-run-copied">
            The clipboard refused; the line is selected: press Ctrl+C (⌘C).
          </span>
        )}
      </div>
    </div>
  );
}

function FirstCallBody() {
  const action = useAppStore((s) => s.firstRunView.firstAction);
  const sessions = useAppStore((s) => s.sessionsView.sessions.length);
  if (action === null) {
    return (
      <p className="first-run-waiting" role="status" data-testid="first-run-waiting">
        Waiting for your agent&apos;s first call…{' '}
        {sessions === 0
          ? 'No agent has connected yet.'
          : `${sessions} agent ${sessions === 1 ? 'session is' : 'sessions are'} open.`}{' '}
        Ask it to call the route; with approval <code>per_call</code> a card appears on Approvals for you to decide.
      </p>
    );
  }
  const waiting = action.ticket !== null && action.decision === null && action.outcome === null;
  return (
    <div className="first-run-arrived" data-testid="first-run-arrived">
      <p>Your agent&apos;s call arrived{waiting ? ' and waits for your decision' : ''}.</p>
      <div className="form-actions">
        {waiting && (
          <a className="button primary" href="#/approvals" data-testid="first-run-card-link">
            Decide on card #{action.ticket}
          </a>
        )}
        <a
          className="button"
          href={actionHref(action.action_id, tabOrigin('welcome'))}
          data-testid="first-run-action-link"
        >
          Open the action {action.action_id}
        </a>
      </div>
    </div>
  );
}

/** "Skip the guide" survives a reload in this browser; storage may be unavailable (then it lasts for the page). */
function useDismissed(): [boolean, () => void] {
  const [dismissed, setDismissed] = useState(() => {
    try {
      return window.localStorage.getItem(dismissedKey) === '1';
    } catch {
      return false;
    }
  });
  const dismiss = () => {
    setDismissed(true);
    try {
      window.localStorage.setItem(dismissedKey, '1');
    } catch {
      // Kept for this page only.
    }
  };
  return [dismissed, dismiss];
}

/**
 * Shown above every tab while the data directory is fresh (no vault, credential or route yet): the
 * steps in one line, the one to take next, a way into the guide and a way to skip it. It never
 * replaces a tab, so nothing else in the UI waits for the first run.
 */
export function FirstRunStrip({ hidden }: { hidden: boolean }) {
  const facts = useFirstRunFacts();
  const fresh = isFreshDataDir(facts);
  const [dismissed, dismiss] = useDismissed();
  if (fresh === false || dismissed) return null;
  return <FreshStrip facts={facts} fresh={fresh} hidden={hidden} onSkip={dismiss} />;
}

function FreshStrip({
  facts,
  fresh,
  hidden,
  onSkip,
}: {
  facts: FirstRunFacts;
  fresh: boolean | null;
  hidden: boolean;
  onSkip(): void;
}) {
  const refreshConfig = useAppStore((s) => s.refreshConfig);
  // Whether any route exists decides freshness; re-read when the vault changes (created, unlocked).
  usePolling(refreshConfig, configRefreshMs, vaultTopics);
  if (fresh !== true || hidden) return null;
  const run = firstRun(facts);
  const current = run.steps.find((step) => step.id === run.current);
  return (
    <nav className="first-run-strip" aria-label="First run" data-testid="first-run-strip">
      <strong>New here?</strong>
      <ol>
        {run.steps.map((step) => (
          <li key={step.id} className={step.state} data-state={step.state}>
            {step.state === 'done' ? '✓ ' : ''}
            {step.title}
          </li>
        ))}
      </ol>
      <a className="button primary" href="#/welcome" data-testid="first-run-strip-open">
        {current === undefined ? 'Open the guide' : `Start: ${current.title.toLowerCase()}`}
      </a>
      <button type="button" onClick={onSkip} data-testid="first-run-strip-skip">
        Skip the guide
      </button>
    </nav>
  );
}
