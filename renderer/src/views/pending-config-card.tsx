import type { ConfigEntryChange } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { sentence, type PendingConfig } from '../store/config-reducer.js';
import { dateTime } from '../../../broker/contract/time-words.js';

type ConfigChange = NonNullable<PendingConfig['change']>;

/**
 * postern.yaml changed outside Postern (by hand, or by an agent running as the same user): the
 * broker keeps running on the last configuration a person accepted and shows the difference here.
 * Accepting it is a decision; it applies at the next start (at once when no configuration was ever
 * accepted with credentials in the vault and the file is the one this run loaded). An untrusted
 * accepted copy shows the whole file, because the old copy proves nothing.
 */
export function PendingConfigCard() {
  const view = useAppStore((state) => state.configView);
  const pending = view.pending;
  if (pending === null) return null;
  return (
    <>
      {pending.trust === 'untrusted' && <UntrustedConfigAlert pending={pending} />}
      {pending.restart_needed && pending.trust !== 'untrusted' && (
        <p className="hint" role="note" data-testid="config-restart-needed">
          The accepted change applies when the broker is restarted.
        </p>
      )}
      {pending.accepted !== null && (
        <p className="muted" data-testid="config-accepted">
          {pending.trust === 'unverified'
            ? 'Not verified until the vault is unlocked (anyone who can write the data directory can write it): the accepted copy claims it was last accepted'
            : 'Configuration last accepted'}{' '}
          {acceptedWords[pending.accepted.how]} by {pending.accepted.by}, {dateTime(pending.accepted.at_ms)}.
        </p>
      )}
      {view.accepted?.ok === false && (
        <div className="error" role="alert" data-testid="config-accept-error">
          <strong>{view.accepted.error.code}</strong>
          <span>{view.accepted.error.message}</span>
        </div>
      )}
      {pending.change !== null && (
        <PendingChange
          change={pending.change}
          appliesNow={pending.accept_applies === 'now'}
          whole={pending.trust === 'unverified' || (pending.trust === 'untrusted' && pending.accepted === null)}
        />
      )}
    </>
  );
}

function UntrustedConfigAlert({ pending }: { pending: PendingConfig }) {
  return (
    <div className="error" role="alert" data-testid="config-untrusted">
      <strong>CONFIG_UNTRUSTED</strong>
      <span>
        {pending.restart_needed
          ? 'A configuration was accepted; restart the broker to use it. Until then every route and host is refused.'
          : `${sentence(pending.untrusted_reason ?? 'The accepted configuration failed its check.')} Every route and host is refused until you accept a configuration below.`}
      </span>
    </div>
  );
}

/** The card for postern.yaml against the accepted copy: what differs, and the decision to accept it. */
function PendingChange({
  change,
  appliesNow,
  whole,
}: {
  change: ConfigChange;
  appliesNow: boolean;
  /** The card is the whole file: no verified accepted copy to compare with (config-integrity.ts pending). */
  whole: boolean;
}) {
  const accepting = useAppStore((state) => state.configView.accepting);
  const accept = useAppStore((state) => state.acceptConfigChange);
  return (
    <article className="card" aria-label="Pending configuration change" data-testid="config-pending">
      {appliesNow ? (
        <>
          <h3>postern.yaml has not been accepted yet</h3>
          <p className="muted" data-testid="config-first-acceptance">
            No accepted configuration: only the file present when a person creates the vault is trusted without a card
            (and never one that turns on the unattended opt-out), so an accepted copy that is missing now was deleted or
            never made. Read every route and host below: nothing is sent until you accept {change.file}, and then it is
            in force at once.
          </p>
        </>
      ) : (
        <>
          <h3>postern.yaml changed outside Postern</h3>
          <p className="muted" data-testid={whole ? 'config-whole-file' : undefined}>
            {whole
              ? `${change.file}, shown whole: the last accepted copy is not verified, so nothing below is a difference from it. Read every route, host and setting; it applies at the next start only if you accept it.`
              : `${change.file} differs from the configuration a person last accepted. The broker keeps using the accepted one; the change applies at the next start only if you accept it.`}
          </p>
        </>
      )}
      {change.invalid !== null ? (
        <p className="error" data-testid="config-pending-invalid">
          <strong>{change.invalid.code}</strong> {change.invalid.message} (fix the file first)
        </p>
      ) : (
        <>
          <ChangeList title="Routes" changes={change.routes} kind="route" />
          <ChangeList title="SSH hosts" changes={change.ssh_hosts} kind="host" />
          <ChangeList title="MCP servers" changes={change.mcp_servers} kind="mcp" />
          <ChangeList title="Settings" changes={change.settings} kind="section" />
          {change.routes.length + change.ssh_hosts.length + change.mcp_servers.length + change.settings.length ===
            0 && <p className="muted">No route, host or setting differs (only formatting or comments).</p>}
          <div className="actions">
            <button
              type="button"
              className="approve"
              disabled={accepting !== null}
              onClick={() => void accept(change.digest)}
            >
              Accept change
            </button>
          </div>
        </>
      )}
    </article>
  );
}

/** How the copy says it was accepted; first use is only the file present when the vault was created, so one here that is not expected is worth a look. */
const acceptedWords = {
  first_use: 'on first use (trusted as found)',
  accepted: 'on a change card',
  edited: 'by an edit from here',
} as const;

function ChangeList({ title, changes, kind }: { title: string; changes: readonly ConfigEntryChange[]; kind: string }) {
  if (changes.length === 0) return null;
  return (
    <>
      <h4>{title}</h4>
      <ul className="config-changes">
        {changes.map((entry) => (
          <li key={entry.name} data-testid={`config-change-${kind}-${entry.name}`}>
            <strong>{entry.name}</strong> <span className="muted">{entry.change}</span>
            <ul>
              {entry.fields.map((f) => (
                <li key={f.field} data-testid={`config-change-${kind}-${entry.name}-${f.field}`}>
                  <code>{f.field}</code>: {f.before === null ? '' : <del>{f.before}</del>}
                  {f.before !== null && f.after !== null && ' → '}
                  {f.after === null ? '' : <ins>{f.after}</ins>}
                  {/* What the value matches when that is wider than it reads (an SSH command rule with a `*`). */}
                  {f.note !== undefined && (
                    <p className="hint" role="note" data-testid={`config-change-${kind}-${entry.name}-${f.field}-note`}>
                      {f.note}
                    </p>
                  )}
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </>
  );
}
