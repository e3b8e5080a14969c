import { useEffect } from 'react';
import { useAppStore } from '../store/app-store.js';
import {
  appliesWords,
  fileChanges,
  routesHeadingWords,
  type ConfigEdit,
  type FileChanges,
  type ShownConfig,
} from '../store/config-reducer.js';
import { AddRouteForm } from './add-route-form.js';
import { AddSshHostForm } from './add-ssh-host-form.js';
import { PendingConfigCard } from './pending-config-card.js';

/**
 * Routes and SSH hosts as the broker runs them. An edit made here is a person's decision: written to
 * the file through the yaml library, checked by the configuration schema, and in force at once while
 * the vault is unlocked and the configuration verified (else at the next start, as the answer says).
 */
export function RoutesView() {
  const view = useAppStore((state) => state.configView);
  const refresh = useAppStore((state) => state.refreshConfig);
  useEffect(() => {
    void refresh();
  }, [refresh]);
  const config = view.config;
  const changes = fileChanges(config, view.edited);
  return (
    <section className="panel" aria-labelledby="routes-heading" data-testid="routes-view">
      <header className="panel-header">
        <h2 id="routes-heading">Routes &amp; hosts</h2>
        <span className="muted" data-testid="routes-heading-words">
          {routesHeadingWords(view.pending)}
        </span>
      </header>
      <p className="muted intro" data-testid="routes-source">
        {config === null
          ? 'Loading…'
          : config.file === null
            ? 'No configuration file was found at start, so there are no routes. Create postern.yaml in the data directory (see docs/config.md); it is read at the next start.'
            : `From ${config.file}. Edits made here apply at once while the vault is unlocked (else at the next start); a change made to the file by hand waits for your acceptance.`}
      </p>
      {config?.edited_since_start === true && (
        <p className="hint" role="note" data-testid="config-edited">
          The configuration file was edited from here since this broker started. The lists below are what the broker
          uses now; the edits apply when it is restarted.
        </p>
      )}
      <EditResult />
      {changes !== null && <FileNow changes={changes} />}
      <PendingConfigCard />
      {view.error !== null && (
        <div className="error" role="alert">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {config !== null && (
        <>
          <h3>HTTP routes</h3>
          {config.routes.length === 0 ? (
            <p className="empty">No routes.</p>
          ) : (
            <RoutesTable routes={config.routes} changes={changes} />
          )}
          <h3>SSH hosts</h3>
          {config.ssh_hosts.length === 0 ? (
            <p className="empty">No SSH hosts.</p>
          ) : (
            <SshHostsTable hosts={config.ssh_hosts} changes={changes} />
          )}
          <AddRouteForm />
          <AddSshHostForm />
        </>
      )}
    </section>
  );
}

function RoutesTable({ routes, changes }: { routes: ShownConfig['routes']; changes: FileChanges | null }) {
  return (
    <table className="sessions" data-testid="routes-list">
      <thead>
        <tr>
          <th scope="col">Route</th>
          <th scope="col">Base URL</th>
          <th scope="col">Credential</th>
          <th scope="col">Approval</th>
          <th scope="col">Methods</th>
          <th scope="col">Lanes</th>
          <th scope="col">
            <span className="visually-hidden">Remove</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {routes.map((route) => (
          <tr
            key={route.name}
            data-testid={`route-${route.name}`}
            className={route.credential_missing ? 'attention' : undefined}
          >
            <td>
              <strong>{route.name}</strong>
              <RemovedFromFile
                removed={changes?.routes.removed.includes(route.name) === true}
                applies={changes?.applies}
                testId={`route-${route.name}-removed`}
              />
              {route.idempotency_header !== null && (
                <div className="muted">idempotency: {route.idempotency_header}</div>
              )}
              {route.lookup !== null && <div className="muted">lookup: {route.lookup}</div>}
              {route.retry_automatic && <div className="muted">automatic retries</div>}
            </td>
            <td>
              <code>{route.base_url}</code>
              {route.tls_pinned && <div className="muted">TLS pinned</div>}
            </td>
            <td>
              {route.credential} <span className="muted">({route.injection})</span>
              <MissingCredential missing={route.credential_missing} testId={`route-${route.name}-credential-missing`} />
            </td>
            <td>{route.approval}</td>
            <td>{route.methods.join(' ')}</td>
            <td>
              {route.lanes.length === 0
                ? 'route lane'
                : route.lanes.map((rule) => (
                    <div key={`${rule.path} ${rule.lane}`}>
                      <code>{rule.methods.join(',')}</code> <code>{rule.path}</code> → <code>{rule.lane}</code>
                    </div>
                  ))}
            </td>
            <td>
              <RemoveFromFile
                entry={`route:${route.name}`}
                edit={{ op: 'remove_route', name: route.name }}
                label={route.name}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function SshHostsTable({ hosts, changes }: { hosts: ShownConfig['ssh_hosts']; changes: FileChanges | null }) {
  return (
    <table className="sessions" data-testid="ssh-hosts-list">
      <thead>
        <tr>
          <th scope="col">Host entry</th>
          <th scope="col">Address</th>
          <th scope="col">Credential</th>
          <th scope="col">Host key</th>
          <th scope="col">Approval</th>
          <th scope="col">Lane</th>
          <th scope="col">
            <span className="visually-hidden">Remove</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {hosts.map((host) => (
          <tr
            key={host.name}
            data-testid={`ssh-host-${host.name}`}
            className={host.credential_missing ? 'attention' : undefined}
          >
            <td>
              <strong>{host.name}</strong>
              <RemovedFromFile
                removed={changes?.ssh_hosts.removed.includes(host.name) === true}
                applies={changes?.applies}
                testId={`ssh-host-${host.name}-removed`}
              />
              {host.commands > 0 && <div className="muted">{host.commands} command rules</div>}
            </td>
            <td>
              <code>
                {host.user}@{host.host}:{host.port}
              </code>
            </td>
            <td>
              {host.credential}
              <MissingCredential
                missing={host.credential_missing}
                testId={`ssh-host-${host.name}-credential-missing`}
              />
            </td>
            <td>{host.host_key}</td>
            <td>{host.approval}</td>
            <td>{host.lane ?? `host:${host.name}`}</td>
            <td>
              <RemoveFromFile
                entry={`host:${host.name}`}
                edit={{ op: 'remove_ssh_host', name: host.name }}
                label={host.name}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Why a row is red: every call on it would fail until the credential is added (Credentials tab or `postern credentials add`). */
function MissingCredential({ missing, testId }: { missing: boolean; testId: string }) {
  if (!missing) return null;
  return (
    <div role="note" data-testid={testId}>
      not in the vault: add it under Credentials
    </div>
  );
}

/**
 * How the last edit of the file went: what the next start will load, or the refusal of a removal.
 * An add form's refusal is shown next to that form instead (FormProblemNote), naming its field.
 */
function EditResult() {
  const edited = useAppStore((state) => state.configView.edited);
  if (edited === null) return null;
  if (!edited.ok) {
    if (edited.op === 'add_route' || edited.op === 'add_ssh_host') return null;
    return (
      <p className="call-result error" role="alert" data-testid="config-edit-result">
        <strong>{edited.error.code}</strong> {edited.error.message}
      </p>
    );
  }
  const { file } = edited;
  const when = file.applies === 'now' ? 'In force now' : 'At the next start';
  return (
    <p className="call-result ok" role="status" data-testid="config-edit-result">
      Saved {file.file}. {when}: routes {file.routes.join(', ') || '(none)'}; SSH hosts{' '}
      {file.ssh_hosts.join(', ') || '(none)'}.
    </p>
  );
}

/**
 * What the file holds now that the broker does not run yet (read again after the edit): the lists
 * below are the broker's, so a route just added would otherwise be nowhere on the page.
 */
function FileNow({ changes }: { changes: FileChanges }) {
  const added = [
    ...changes.routes.added.map((name) => ({ kind: 'route', name })),
    ...changes.ssh_hosts.added.map((name) => ({ kind: 'SSH host', name })),
  ];
  const removed = changes.routes.removed.length + changes.ssh_hosts.removed.length;
  if (added.length === 0 && removed === 0) return null;
  return (
    <div className="file-now" role="note" data-testid="config-file-now">
      <strong>
        In {changes.file} now ({appliesWords(changes.applies)}):
      </strong>
      {added.length > 0 && (
        <ul>
          {added.map((entry) => (
            <li key={`${entry.kind}:${entry.name}`} data-testid={`file-added-${entry.name}`}>
              {entry.kind} <strong>{entry.name}</strong> — added to the file, not loaded by this broker yet
            </li>
          ))}
        </ul>
      )}
      {removed > 0 && (
        <p className="muted">
          {removed === 1 ? 'One entry below is' : `${removed} entries below are`} no longer in the file (marked).
        </p>
      )}
    </div>
  );
}

function RemovedFromFile({
  removed,
  applies,
  testId,
}: {
  removed: boolean;
  applies: string | undefined;
  testId: string;
}) {
  if (!removed || applies === undefined) return null;
  return (
    <div className="attention" data-testid={testId}>
      removed from the file; {applies === 'now' ? 'gone now' : 'gone at the next start'}
    </div>
  );
}

function RemoveFromFile({ entry, edit, label }: { entry: string; edit: ConfigEdit; label: string }) {
  const confirming = useAppStore((state) => state.configView.confirming === entry);
  const busy = useAppStore((state) => state.configView.editing !== null);
  const ask = useAppStore((state) => state.askRemoveConfigEntry);
  const dismiss = useAppStore((state) => state.dismissRemoveConfigEntry);
  const editConfig = useAppStore((state) => state.editConfig);
  if (!confirming) {
    return (
      <button type="button" onClick={() => ask(entry)} disabled={busy}>
        Remove…
      </button>
    );
  }
  return (
    <span className="form-actions">
      <button type="button" className="danger" onClick={() => void editConfig(edit)} disabled={busy}>
        Remove {label}
      </button>
      <button type="button" onClick={dismiss}>
        Keep
      </button>
    </span>
  );
}
