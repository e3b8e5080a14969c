import { useEffect, useId, useState, type ChangeEvent, type FormEvent } from 'react';
import type { ApprovalMode, InjectionKind } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import {
  formFieldOf,
  parsePins,
  routeFieldsByKey,
  sshCredentialUse,
  sshHostEdit,
  sshHostFieldsByKey,
  type FormProblem,
  type RouteField,
  type SshHostDraft,
  type SshHostField,
} from '../store/config-host-input.js';
import {
  appliesWords,
  fileChanges,
  parseMethods,
  type ConfigEdit,
  type ConfigView,
  type FileChanges,
} from '../store/config-reducer.js';
import { AddForm, Field, FormDone, FormRefusal } from './add-form.js';
import { PendingConfigCard } from './pending-config-card.js';
import { usePolling } from './use-polling.js';

/**
 * Routes and SSH hosts as the broker runs them. An edit made here is a person's decision: written to
 * the file through the yaml library, checked by the configuration schema, and in force at once while
 * the vault is unlocked and the configuration verified (else at the next start, as the answer says).
 */
// eslint-disable-next-line max-lines-per-function -- routes and SSH hosts tables with their add forms; #17 moves the forms onto add-form
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
        <span className="muted">{changes?.applies === 'now' ? 'as the broker runs it now' : 'as loaded at start'}</span>
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
                      <MissingCredential
                        missing={route.credential_missing}
                        testId={`route-${route.name}-credential-missing`}
                      />
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

// eslint-disable-next-line max-lines-per-function -- wrapped at 120 columns by the formatter it grew past 80 lines; split it when it next changes
export function AddRouteForm() {
  const { id, problem, invalid, begin, write, formProps } = useFileEntryForm(routeForm);
  const [name, setName] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [credential, setCredential] = useState('');
  const [injection, setInjection] = useState<InjectionKind>('bearer');
  const [approval, setApproval] = useState<ApprovalMode>('per_call');
  const [methods, setMethods] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    begin();
    const chosen = parseMethods(methods) as Array<'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'>;
    const route = {
      name: name.trim(),
      base_url: baseUrl.trim(),
      credential: credential.trim(),
      injection,
      approval,
      ...(chosen.length === 0 ? {} : { methods: chosen }),
    };
    void write({ op: 'add_route', route }, route.name).then((written) => {
      if (!written) return;
      setName('');
      setBaseUrl('');
      setCredential('');
      setMethods('');
    });
  };
  return (
    <AddForm
      title="Add route"
      {...formProps}
      onSubmit={submit}
      intro={<p className="muted">Lanes, idempotency contracts, lookups and TLS pins are edited in the file itself.</p>}
      submit="Add route to the file"
    >
      <Field id={`${id}-name`} label={routeFieldLabels.name} invalid={problem?.field === 'name'}>
        <input
          id={`${id}-name`}
          value={name}
          onChange={(e) => setName(e.target.value)}
          maxLength={64}
          required
          {...invalid('name')}
        />
      </Field>
      <Field id={`${id}-url`} label={routeFieldLabels.base_url} invalid={problem?.field === 'base_url'}>
        <input
          id={`${id}-url`}
          value={baseUrl}
          onChange={(e) => setBaseUrl(e.target.value)}
          maxLength={2048}
          required
          {...invalid('base_url')}
        />
      </Field>
      <Field id={`${id}-credential`} label={routeFieldLabels.credential} invalid={problem?.field === 'credential'}>
        <input
          id={`${id}-credential`}
          value={credential}
          onChange={(e) => setCredential(e.target.value)}
          maxLength={200}
          required
          {...invalid('credential')}
        />
      </Field>
      <Field id={`${id}-injection`} label={routeFieldLabels.injection} invalid={problem?.field === 'injection'}>
        <select
          id={`${id}-injection`}
          value={injection}
          onChange={(e) => setInjection(e.target.value as typeof injection)}
          {...invalid('injection')}
        >
          <option value="bearer">bearer</option>
          <option value="header">header</option>
          <option value="basic">basic</option>
          <option value="query">query</option>
        </select>
      </Field>
      <Field id={`${id}-approval`} label={routeFieldLabels.approval} invalid={problem?.field === 'approval'}>
        <ApprovalSelect id={`${id}-approval`} value={approval} onChange={setApproval} />
      </Field>
      <Field id={`${id}-methods`} label={routeFieldLabels.methods} invalid={problem?.field === 'methods'}>
        <input
          id={`${id}-methods`}
          value={methods}
          onChange={(e) => setMethods(e.target.value)}
          maxLength={64}
          {...invalid('methods')}
        />
      </Field>
    </AddForm>
  );
}

// eslint-disable-next-line max-lines-per-function -- wrapped at 120 columns by the formatter it grew past 80 lines; split it when it next changes
export function AddSshHostForm() {
  const [draft, setDraft] = useState<SshHostDraft>(emptySshHostDraft);
  const [checked, setChecked] = useState<FormProblem<SshHostField> | null>(null);
  const { id, problem, invalid, begin, write, formProps } = useFileEntryForm(sshHostForm, checked);
  const change = (field: keyof SshHostDraft) => (e: ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) =>
    setDraft((d) => ({ ...d, [field]: e.target.value }));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    begin();
    const result = sshHostEdit(draft);
    if (!result.ok) {
      setChecked({ field: result.field, code: result.code, message: result.message });
      return;
    }
    setChecked(null);
    void write(result.edit, result.edit.host.name).then((written) => {
      if (!written) return;
      setDraft((d) => ({ ...emptySshHostDraft, approval: d.approval }));
    });
  };
  const pins = parsePins(draft.pins);
  const intro = (
    <p className="muted">
      What an agent names for <code>ssh_exec</code>. The key stays in the vault: an <code>ssh_key</code> credential
      bound to this entry&apos;s host (an entry added here needs that, not only its name; docs/config.md). Command
      rules, lanes and output limits are edited in the file itself.
    </p>
  );
  return (
    <AddForm title="Add SSH host" {...formProps} onSubmit={submit} intro={intro} submit="Add SSH host to the file">
      <Field id={`${id}-name`} label={sshHostFieldLabels.name} invalid={problem?.field === 'name'}>
        <input
          id={`${id}-name`}
          value={draft.name}
          onChange={change('name')}
          maxLength={64}
          required
          placeholder="web-1"
          {...invalid('name')}
        />
      </Field>
      <Field id={`${id}-host`} label={sshHostFieldLabels.host} invalid={problem?.field === 'host'}>
        <input
          id={`${id}-host`}
          value={draft.host}
          onChange={change('host')}
          maxLength={253}
          required
          placeholder="web-1.internal, 10.0.0.5 or 2001:db8::5"
          {...invalid('host')}
        />
      </Field>
      <Field id={`${id}-port`} label={sshHostFieldLabels.port} invalid={problem?.field === 'port'}>
        <input
          id={`${id}-port`}
          inputMode="numeric"
          value={draft.port}
          onChange={change('port')}
          maxLength={5}
          placeholder="22"
          {...invalid('port')}
        />
      </Field>
      <Field id={`${id}-user`} label={sshHostFieldLabels.user} invalid={problem?.field === 'user'}>
        <input
          id={`${id}-user`}
          value={draft.user}
          onChange={change('user')}
          maxLength={64}
          required
          {...invalid('user')}
        />
      </Field>
      <Field id={`${id}-credential`} label={sshHostFieldLabels.credential} invalid={problem?.field === 'credential'}>
        <input
          id={`${id}-credential`}
          value={draft.credential}
          onChange={change('credential')}
          maxLength={200}
          required
          list={`${id}-keys`}
          {...invalid('credential')}
        />
        <SshCredentialNote id={`${id}-keys`} draft={draft} />
      </Field>
      <Field id={`${id}-pins`} label={sshHostFieldLabels.pins} invalid={problem?.field === 'pins'}>
        <textarea
          id={`${id}-pins`}
          value={draft.pins}
          onChange={change('pins')}
          maxLength={1024}
          rows={2}
          {...invalid('pins')}
        />
        <span className="muted" data-testid="ssh-host-key-mode">
          {draft.pins.trim() === ''
            ? 'Host key: accept_new — the first key seen is kept once login succeeds; a changed key is always refused.'
            : pins.ok
              ? `Host key: pinned (${pins.pins.length})`
              : ''}
        </span>
      </Field>
      <Field id={`${id}-approval`} label={sshHostFieldLabels.approval} invalid={problem?.field === 'approval'}>
        <ApprovalSelect
          id={`${id}-approval`}
          value={draft.approval}
          onChange={(approval) => setDraft((d) => ({ ...d, approval }))}
        />
      </Field>
    </AddForm>
  );
}

const emptySshHostDraft: SshHostDraft = {
  name: '',
  host: '',
  port: '22',
  user: '',
  credential: '',
  pins: '',
  approval: 'per_call',
};

/** The forms' fields as their labels say them, so a refusal names the field the person sees. */
const sshHostFieldLabels: Record<SshHostField, string> = {
  name: 'Host entry name',
  host: 'Host name or address',
  port: 'Port',
  user: 'User',
  credential: 'SSH key credential name',
  pins: 'Pinned host key fingerprints (SHA256:…, comma separated or as ssh-keygen -lf prints them; empty: trust on first use)',
  approval: 'Approval',
};
const routeFieldLabels: Record<RouteField, string> = {
  name: 'Route name',
  base_url: 'Base URL',
  credential: 'Credential name',
  injection: 'Injection',
  approval: 'Approval',
  methods: 'Methods (comma separated; empty: all)',
};

/** What one add form of the file is: its edit, its fields as the broker names them and as the form labels them. */
interface FileEntryForm<F extends string> {
  op: 'add_route' | 'add_ssh_host';
  fieldsByKey: Readonly<Record<string, F>>;
  labels: Record<F, string>;
  testId: string;
  what: string;
}
const routeForm: FileEntryForm<RouteField> = {
  op: 'add_route',
  fieldsByKey: routeFieldsByKey,
  labels: routeFieldLabels,
  testId: 'route-form',
  what: 'route',
};
const sshHostForm: FileEntryForm<SshHostField> = {
  op: 'add_ssh_host',
  fieldsByKey: sshHostFieldsByKey,
  labels: sshHostFieldLabels,
  testId: 'ssh-host-form',
  what: 'SSH host',
};

/**
 * What both add forms of the file share: the edit call, the refusal next to the form naming its field
 * (`checked`, what the form found itself, wins over an older refusal by the broker: it is about the newer
 * input), and the form's own word that its entry was written.
 */
function useFileEntryForm<F extends string>(form: FileEntryForm<F>, checked: FormProblem<F> | null = null) {
  const busy = useAppStore((state) => state.configView.editing !== null);
  const edited = useAppStore((state) => state.configView.edited);
  const editConfig = useAppStore((state) => state.editConfig);
  const id = useId();
  const [added, setAdded] = useState<string | null>(null);
  const problem = checked ?? refusalFor(edited, form.op, form.fieldsByKey);
  const answer = (
    <>
      <FormProblemNote id={`${id}-error`} problem={problem} labels={form.labels} testId={`${form.testId}-error`} />
      <FormAdded added={added} edited={edited} op={form.op} what={form.what} testId={`${form.testId}-result`} />
    </>
  );
  return {
    id,
    problem,
    invalid: invalidProps(problem, `${id}-error`),
    /** A new submit: the word on the previous entry goes. */
    begin: () => setAdded(null),
    /** Sends the edit; once written, `name` is said under the form. Resolves true when written. */
    write: (edit: ConfigEdit, name: string) =>
      editConfig(edit).then((written) => {
        if (written) setAdded(name);
        return written;
      }),
    formProps: { testId: form.testId, noValidate: true, busy: busy ? 'Saving…' : null, answer },
  };
}

/** The broker's refusal of this form's last edit, with the field it names. */
function refusalFor<F extends string>(
  edited: ConfigView['edited'],
  op: ConfigEdit['op'],
  fields: Readonly<Record<string, F>>,
): FormProblem<F> | null {
  if (edited === null || edited.ok || edited.op !== op) return null;
  return { field: formFieldOf(edited.error, fields), code: edited.error.code, message: edited.error.message };
}

/** The attributes that tie the field a refusal names to the refusal's text. */
function invalidProps<F extends string>(problem: FormProblem<F> | null, errorId: string) {
  return (field: F) => (problem?.field === field ? { 'aria-invalid': true, 'aria-describedby': errorId } : {});
}

// noValidate on these forms: every refusal, the browser's included, is said in words here and names its field.
function FormProblemNote<F extends string>({
  id,
  problem,
  labels,
  testId,
}: {
  id: string;
  problem: FormProblem<F> | null;
  labels: Record<F, string>;
  testId: string;
}) {
  if (problem === null) return null;
  const label = problem.field === null ? null : labels[problem.field].replace(/ \(.*$/, '');
  const detail = label === null ? '' : <span className="form-problem-field">{label}: </span>;
  return <FormRefusal id={id} testId={testId} error={problem} detail={detail} field={problem.field ?? ''} />;
}

/** The form's own word that its entry was written (the page's banner says the same for every edit). */
function FormAdded({
  added,
  edited,
  op,
  what,
  testId,
}: {
  added: string | null;
  edited: ConfigView['edited'];
  op: ConfigEdit['op'];
  what: string;
  testId: string;
}) {
  if (added === null || edited === null || !edited.ok || edited.op !== op) return null;
  return (
    <FormDone testId={testId}>
      Added {what} <strong>{added}</strong> to {edited.file.file}: {appliesWords(edited.file.applies)}.
    </FormDone>
  );
}

/**
 * Which credential the entry will use and whether it is bound to it, from credentials.list (names,
 * kinds, bindings: never a secret). Read on mount, on the vault's push notices and when the window
 * regains focus (after `postern vault bind` in a terminal), and on "Check again".
 */
// eslint-disable-next-line max-lines-per-function -- wrapped at 120 columns by the formatter it grew past 80 lines; split it when it next changes
function SshCredentialNote({ id, draft }: { id: string; draft: SshHostDraft }) {
  const view = useAppStore((state) => state.credentialsView);
  const dataDir = useAppStore((state) => state.statusView.status?.data_dir ?? null);
  const refresh = useAppStore((state) => state.refreshCredentials);
  usePolling(refresh, credentialsRefreshMs, vaultTopics);
  useEffect(() => {
    const onFocus = () => void refresh();
    window.addEventListener('focus', onFocus);
    return () => window.removeEventListener('focus', onFocus);
  }, [refresh]);
  const keys = view.credentials.filter((c) => c.kind === 'ssh_key');
  const use = sshCredentialUse(draft, {
    listed: view.replies > 0 && view.error === null,
    credentials: view.credentials,
    dataDir,
  });
  const again = (
    <button
      type="button"
      className="link-button"
      onClick={() => void refresh()}
      data-testid="ssh-host-credential-recheck"
    >
      Check again
    </button>
  );
  return (
    <>
      <datalist id={id}>
        {keys.map((c) => (
          <option key={c.name} value={c.name} />
        ))}
      </datalist>
      {use !== null && (
        <div
          className={`credential-use ${use.state === 'bound' ? 'ok' : 'warning'}`}
          role="note"
          data-testid="ssh-host-credential"
          data-state={use.state}
        >
          {use.state === 'unknown' && (
            <span>
              The vault&apos;s credential list could not be read, so whether this key is bound is not known. {again}
            </span>
          )}
          {use.state === 'bound' && (
            <span>
              Uses <strong>{use.credential}</strong> (ssh_key, {use.version_tag}), bound to <code>{use.via}</code>.
            </span>
          )}
          {use.state === 'wrong_kind' && (
            <span>
              <strong>{use.credential}</strong> is a {use.kind} credential; an SSH host needs an <code>ssh_key</code>{' '}
              one. {again}
            </span>
          )}
          {use.state === 'missing' && (
            <span>
              <strong>{use.credential}</strong> is not in the vault: every command would fail until it is added
              (Credentials tab, kind ssh_key, or <code>{use.fix}</code>). {again}
            </span>
          )}
          {use.state === 'name_only' && (
            <span>
              <strong>{use.credential}</strong> is bound to this entry&apos;s name ({use.name}) but not to its host{' '}
              {use.host}: an entry added from here needs the key bound to the host too, so the name cannot take the key
              to another machine. Bind it (asks for the vault passphrase):{' '}
              <code data-testid="ssh-host-credential-fix">{use.fix}</code> {again}
            </span>
          )}
          {use.state === 'unbound' && (
            <span>
              <strong>{use.credential}</strong> is bound to{' '}
              {use.bindings.length === 0 ? 'nothing' : use.bindings.join(', ')}, not to this entry&apos;s host: every
              command would fail with CREDENTIAL_MISSING. Bind it (asks for the vault passphrase):{' '}
              <code data-testid="ssh-host-credential-fix">{use.fix}</code> {again}
            </span>
          )}
        </div>
      )}
    </>
  );
}

/** The credential list's fallback read while the vault's push notices are down. */
const credentialsRefreshMs = 30_000;
const vaultTopics = ['vault'] as const;

function ApprovalSelect({
  id,
  value,
  onChange,
}: {
  id: string;
  value: ApprovalMode;
  onChange(value: ApprovalMode): void;
}) {
  return (
    <select id={id} value={value} onChange={(e) => onChange(e.target.value as ApprovalMode)}>
      <option value="per_call">per_call — a person approves each call</option>
      <option value="session">session — once per agent process</option>
      <option value="none">none</option>
    </select>
  );
}
