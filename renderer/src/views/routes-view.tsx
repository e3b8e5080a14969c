import { useEffect, useId, useState, type FormEvent, type ReactNode } from 'react';
import { useAppStore } from '../store/app-store.js';
import { parseMethods, type ConfigEdit } from '../store/config-reducer.js';
import { PendingConfigCard } from './pending-config-card.js';

/**
 * Routes and SSH hosts as the broker loaded them at start. The file is the source of truth and is
 * checked as a whole at start, so an edit made here (written to the file through the yaml library,
 * checked by the configuration schema) applies at the next start, never to the running broker.
 */
export function RoutesView() {
  const view = useAppStore((state) => state.configView);
  const refresh = useAppStore((state) => state.refreshConfig);
  useEffect(() => {
    void refresh();
  }, [refresh]);
  const config = view.config;
  return (
    <section className="panel" aria-labelledby="routes-heading" data-testid="routes-view">
      <header className="panel-header">
        <h2 id="routes-heading">Routes &amp; hosts</h2>
        <span className="muted">as loaded at start</span>
      </header>
      <p className="muted intro" data-testid="routes-source">
        {config === null
          ? 'Loading…'
          : config.file === null
            ? 'No configuration file was found at start, so there are no routes. Create postern.yaml in the data directory (see docs/config.md); it is read at the next start.'
            : `As loaded at start from ${config.file}. Edits made here apply at the next start; a change made to the file by hand waits for your acceptance.`}
      </p>
      {config?.edited_since_start === true && (
        <p className="hint" role="note" data-testid="config-edited">
          The configuration file was edited from here since this broker started. The lists below are what the broker uses now; the edits apply when it is restarted.
        </p>
      )}
      <EditResult />
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
                {config.routes.map((route) => (
                  <tr key={route.name} data-testid={`route-${route.name}`} className={route.credential_missing ? 'attention' : undefined}>
                    <td>
                      <strong>{route.name}</strong>
                      {route.idempotency_header !== null && <div className="muted">idempotency: {route.idempotency_header}</div>}
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
                      <RemoveFromFile entry={`route:${route.name}`} edit={{ op: 'remove_route', name: route.name }} label={route.name} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h3>SSH hosts</h3>
          {config.ssh_hosts.length === 0 ? (
            <p className="empty">No SSH hosts.</p>
          ) : (
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
                {config.ssh_hosts.map((host) => (
                  <tr key={host.name} data-testid={`ssh-host-${host.name}`} className={host.credential_missing ? 'attention' : undefined}>
                    <td>
                      <strong>{host.name}</strong>
                      {host.commands > 0 && <div className="muted">{host.commands} command rules</div>}
                    </td>
                    <td>
                      <code>
                        {host.user}@{host.host}:{host.port}
                      </code>
                    </td>
                    <td>
                      {host.credential}
                      <MissingCredential missing={host.credential_missing} testId={`ssh-host-${host.name}-credential-missing`} />
                    </td>
                    <td>{host.host_key}</td>
                    <td>{host.approval}</td>
                    <td>{host.lane ?? `host:${host.name}`}</td>
                    <td>
                      <RemoveFromFile entry={`host:${host.name}`} edit={{ op: 'remove_ssh_host', name: host.name }} label={host.name} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <AddRouteForm />
          <AddSshHostForm />
        </>
      )}
    </section>
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

/** How the last edit of the file went: what the next start will load, or the refusal naming the field. */
function EditResult() {
  const edited = useAppStore((state) => state.configView.edited);
  if (edited === null) return null;
  if (!edited.ok) {
    return (
      <p className="call-result error" role="alert" data-testid="config-edit-result">
        <strong>{edited.error.code}</strong> {edited.error.message}
      </p>
    );
  }
  const { file } = edited;
  return (
    <p className="call-result ok" role="status" data-testid="config-edit-result">
      Saved {file.file}. At the next start: routes {file.routes.join(', ') || '(none)'}; SSH hosts {file.ssh_hosts.join(', ') || '(none)'}.
    </p>
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
        Remove {label} at next start
      </button>
      <button type="button" onClick={dismiss}>
        Keep
      </button>
    </span>
  );
}

function AddRouteForm() {
  const busy = useAppStore((state) => state.configView.editing !== null);
  const editConfig = useAppStore((state) => state.editConfig);
  const id = useId();
  const [name, setName] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [credential, setCredential] = useState('');
  const [injection, setInjection] = useState<'bearer' | 'header' | 'basic' | 'query'>('bearer');
  const [approval, setApproval] = useState<'none' | 'session' | 'per_call'>('per_call');
  const [methods, setMethods] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const chosen = parseMethods(methods) as Array<'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'>;
    void editConfig({
      op: 'add_route',
      route: { name: name.trim(), base_url: baseUrl.trim(), credential: credential.trim(), injection, approval, ...(chosen.length === 0 ? {} : { methods: chosen }) },
    }).then((written) => {
      if (!written) return;
      setName('');
      setBaseUrl('');
      setCredential('');
      setMethods('');
    });
  };
  return (
    <form className="credential-form" onSubmit={submit} aria-label="Add route">
      <h3>Add route (at next start)</h3>
      <p className="muted">Lanes, idempotency contracts, lookups and TLS pins are edited in the file itself.</p>
      <fieldset disabled={busy}>
        <Field id={`${id}-name`} label="Route name">
          <input id={`${id}-name`} value={name} onChange={(e) => setName(e.target.value)} maxLength={64} required />
        </Field>
        <Field id={`${id}-url`} label="Base URL">
          <input id={`${id}-url`} value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} maxLength={2048} required />
        </Field>
        <Field id={`${id}-credential`} label="Credential name">
          <input id={`${id}-credential`} value={credential} onChange={(e) => setCredential(e.target.value)} maxLength={200} required />
        </Field>
        <Field id={`${id}-injection`} label="Injection">
          <select id={`${id}-injection`} value={injection} onChange={(e) => setInjection(e.target.value as typeof injection)}>
            <option value="bearer">bearer</option>
            <option value="header">header</option>
            <option value="basic">basic</option>
            <option value="query">query</option>
          </select>
        </Field>
        <Field id={`${id}-approval`} label="Approval">
          <ApprovalSelect id={`${id}-approval`} value={approval} onChange={setApproval} />
        </Field>
        <Field id={`${id}-methods`} label="Methods (comma separated; empty: all)">
          <input id={`${id}-methods`} value={methods} onChange={(e) => setMethods(e.target.value)} maxLength={64} />
        </Field>
        <div className="form-actions">
          <button type="submit" className="primary">
            {busy ? 'Saving…' : 'Add route to the file'}
          </button>
        </div>
      </fieldset>
    </form>
  );
}

function AddSshHostForm() {
  const busy = useAppStore((state) => state.configView.editing !== null);
  const editConfig = useAppStore((state) => state.editConfig);
  const id = useId();
  const [name, setName] = useState('');
  const [host, setHost] = useState('');
  const [port, setPort] = useState('22');
  const [user, setUser] = useState('');
  const [credential, setCredential] = useState('');
  const [pins, setPins] = useState('');
  const [approval, setApproval] = useState<'none' | 'session' | 'per_call'>('per_call');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const pinned = pins.split(/[\s,]+/).filter((pin) => pin !== '');
    void editConfig({
      op: 'add_ssh_host',
      host: {
        name: name.trim(),
        host: host.trim(),
        port: Number(port),
        user: user.trim(),
        credential: credential.trim(),
        host_key: pinned.length === 0 ? 'accept_new' : { pinned },
        approval,
      },
    }).then((written) => {
      if (!written) return;
      setName('');
      setHost('');
      setUser('');
      setCredential('');
      setPins('');
    });
  };
  return (
    <form className="credential-form" onSubmit={submit} aria-label="Add SSH host">
      <h3>Add SSH host (at next start)</h3>
      <fieldset disabled={busy}>
        <Field id={`${id}-name`} label="Host entry name">
          <input id={`${id}-name`} value={name} onChange={(e) => setName(e.target.value)} maxLength={64} required />
        </Field>
        <Field id={`${id}-host`} label="Host name or address">
          <input id={`${id}-host`} value={host} onChange={(e) => setHost(e.target.value)} maxLength={253} required />
        </Field>
        <Field id={`${id}-port`} label="Port">
          <input id={`${id}-port`} type="number" min={1} max={65535} value={port} onChange={(e) => setPort(e.target.value)} required />
        </Field>
        <Field id={`${id}-user`} label="User">
          <input id={`${id}-user`} value={user} onChange={(e) => setUser(e.target.value)} maxLength={64} required />
        </Field>
        <Field id={`${id}-credential`} label="SSH key credential name">
          <input id={`${id}-credential`} value={credential} onChange={(e) => setCredential(e.target.value)} maxLength={200} required />
        </Field>
        <Field id={`${id}-pins`} label="Pinned host key fingerprints (SHA256:…, comma separated; empty: trust on first use)">
          <input id={`${id}-pins`} value={pins} onChange={(e) => setPins(e.target.value)} maxLength={1024} />
        </Field>
        <Field id={`${id}-approval`} label="Approval">
          <ApprovalSelect id={`${id}-approval`} value={approval} onChange={setApproval} />
        </Field>
        <div className="form-actions">
          <button type="submit" className="primary">
            {busy ? 'Saving…' : 'Add SSH host to the file'}
          </button>
        </div>
      </fieldset>
    </form>
  );
}

function Field({ id, label, children }: { id: string; label: string; children: ReactNode }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children}
    </div>
  );
}

function ApprovalSelect({ id, value, onChange }: { id: string; value: 'none' | 'session' | 'per_call'; onChange(value: 'none' | 'session' | 'per_call'): void }) {
  return (
    <select id={id} value={value} onChange={(e) => onChange(e.target.value as 'none' | 'session' | 'per_call')}>
      <option value="per_call">per_call — a person approves each call</option>
      <option value="session">session — once per agent process</option>
      <option value="none">none</option>
    </select>
  );
}
