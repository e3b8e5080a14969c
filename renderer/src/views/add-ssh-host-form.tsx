import { useEffect, useState, type ChangeEvent, type FormEvent, type ReactNode } from 'react';
import { useAppStore } from '../store/app-store.js';
import {
  parsePins,
  sshCredentialUse,
  sshHostEdit,
  sshHostFieldsByKey,
  type FormProblem,
  type SshCredentialUse,
  type SshHostDraft,
  type SshHostField,
} from '../store/config-host-input.js';
import { AddForm, Field } from './add-form.js';
import {
  ApprovalField,
  TextField,
  useFileEntryForm,
  type FieldKit,
  type FileEntryForm,
  type InvalidProps,
} from './file-entry-form.js';
import { usePolling } from './use-polling.js';

export function AddSshHostForm() {
  const [draft, setDraft] = useState<SshHostDraft>(emptySshHostDraft);
  const [checked, setChecked] = useState<FormProblem<SshHostField> | null>(null);
  const { id, problem, invalid, begin, write, formProps } = useFileEntryForm(sshHostForm, checked);
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
  const intro = (
    <p className="muted">
      What an agent names for <code>ssh_exec</code>. The key stays in the vault: an <code>ssh_key</code> credential
      bound to this entry&apos;s host (an entry added here needs that, not only its name; docs/config.md). Command
      rules, lanes and output limits are edited in the file itself.
    </p>
  );
  const fields = { id, draft, setDraft, problem, invalid };
  return (
    <AddForm title="Add SSH host" {...formProps} onSubmit={submit} intro={intro} submit="Add SSH host to the file">
      <SshAddressFields {...fields} />
      <SshTrustFields {...fields} />
    </AddForm>
  );
}

interface SshHostFieldsProps {
  id: string;
  draft: SshHostDraft;
  setDraft(update: (d: SshHostDraft) => SshHostDraft): void;
  problem: FormProblem<SshHostField> | null;
  invalid: InvalidProps<SshHostField>;
}

function changeOf(setDraft: SshHostFieldsProps['setDraft']) {
  return (field: keyof SshHostDraft) => (e: ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) =>
    setDraft((d) => ({ ...d, [field]: e.target.value }));
}

/** Where the host is and whom to log in as. */
function SshAddressFields({ id, draft, setDraft, problem, invalid }: SshHostFieldsProps) {
  const kit: FieldKit<SshHostField> = { id, problem, invalid, labels: sshHostFieldLabels };
  const change = changeOf(setDraft);
  return (
    <>
      <TextField
        kit={kit}
        field="name"
        value={draft.name}
        onChange={change('name')}
        maxLength={64}
        required
        placeholder="web-1"
      />
      <TextField
        kit={kit}
        field="host"
        value={draft.host}
        onChange={change('host')}
        maxLength={253}
        required
        placeholder="web-1.internal, 10.0.0.5 or 2001:db8::5"
      />
      <TextField
        kit={kit}
        field="port"
        inputMode="numeric"
        value={draft.port}
        onChange={change('port')}
        maxLength={5}
        placeholder="22"
      />
      <TextField kit={kit} field="user" value={draft.user} onChange={change('user')} maxLength={64} required />
    </>
  );
}

/** What the broker trusts the entry with: its key credential, the host keys it accepts, and who approves. */
function SshTrustFields({ id, draft, setDraft, problem, invalid }: SshHostFieldsProps) {
  const kit: FieldKit<SshHostField> = { id, problem, invalid, labels: sshHostFieldLabels };
  const change = changeOf(setDraft);
  const pins = parsePins(draft.pins);
  return (
    <>
      <TextField
        kit={kit}
        field="credential"
        value={draft.credential}
        onChange={change('credential')}
        maxLength={200}
        required
        list={`${id}-keys`}
      >
        <SshCredentialNote id={`${id}-keys`} draft={draft} />
      </TextField>
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
      <ApprovalField
        kit={kit}
        field="approval"
        value={draft.approval}
        onChange={(approval) => setDraft((d) => ({ ...d, approval }))}
      />
    </>
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

/** The form's fields as their labels say them, so a refusal names the field the person sees. */
const sshHostFieldLabels: Record<SshHostField, string> = {
  name: 'Host entry name',
  host: 'Host name or address',
  port: 'Port',
  user: 'User',
  credential: 'SSH key credential name',
  pins: 'Pinned host key fingerprints (SHA256:…, comma separated or as ssh-keygen -lf prints them; empty: trust on first use)',
  approval: 'Approval',
};
const sshHostForm: FileEntryForm<SshHostField> = {
  op: 'add_ssh_host',
  fieldsByKey: sshHostFieldsByKey,
  labels: sshHostFieldLabels,
  testId: 'ssh-host-form',
  what: 'SSH host',
};

/**
 * Which credential the entry will use and whether it is bound to it, from credentials.list (names,
 * kinds, bindings: never a secret). Read on mount, on the vault's push notices and when the window
 * regains focus (after `postern vault bind` in a terminal), and on "Check again".
 */
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
          <CredentialUseText use={use} again={again} />
        </div>
      )}
    </>
  );
}

/** The credential's use in words; each state that needs a step says it, with a button to read the list again. */
function CredentialUseText({ use, again }: { use: SshCredentialUse; again: ReactNode }) {
  switch (use.state) {
    case 'unknown':
      return (
        <span>
          The vault&apos;s credential list could not be read, so whether this key is bound is not known. {again}
        </span>
      );
    case 'bound':
      return (
        <span>
          Uses <strong>{use.credential}</strong> (ssh_key, {use.version_tag}), bound to <code>{use.via}</code>.
        </span>
      );
    case 'wrong_kind':
      return (
        <span>
          <strong>{use.credential}</strong> is a {use.kind} credential; an SSH host needs an <code>ssh_key</code> one.{' '}
          {again}
        </span>
      );
    case 'missing':
      return (
        <span>
          <strong>{use.credential}</strong> is not in the vault: every command would fail until it is added (Credentials
          tab, kind ssh_key, or <code>{use.fix}</code>). {again}
        </span>
      );
    case 'name_only':
      return (
        <span>
          <strong>{use.credential}</strong> is bound to this entry&apos;s name ({use.name}) but not to its host{' '}
          {use.host}: an entry added from here needs the key bound to the host too, so the name cannot take the key to
          another machine. Bind it (asks for the vault passphrase):{' '}
          <code data-testid="ssh-host-credential-fix">{use.fix}</code> {again}
        </span>
      );
    case 'unbound':
      return (
        <span>
          <strong>{use.credential}</strong> is bound to{' '}
          {use.bindings.length === 0 ? 'nothing' : use.bindings.join(', ')}, not to this entry&apos;s host: every
          command would fail with CREDENTIAL_MISSING. Bind it (asks for the vault passphrase):{' '}
          <code data-testid="ssh-host-credential-fix">{use.fix}</code> {again}
        </span>
      );
  }
}

/** The credential list's fallback read while the vault's push notices are down. */
const credentialsRefreshMs = 30_000;
const vaultTopics = ['vault'] as const;
