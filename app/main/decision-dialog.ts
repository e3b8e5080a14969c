import type { ApprovalCard, BrokerApiMethod } from '../../broker/contract/index.js';

/** What main's confirmation dialog says: worded from main's own data, never from text the renderer sent. */
export interface DecisionDialog {
  readonly message: string;
  readonly detail: string;
  readonly confirmLabel: string;
}

const verbs: Partial<Record<BrokerApiMethod, string>> = {
  'approvals.approve': 'Approve',
  'approvals.reject': 'Reject',
  'approvals.cancel': 'Cancel',
  'approvals.abandon': 'Abandon',
  'actions.attest': 'Attest the outcome of',
  'actions.reconcile': 'Reconcile',
  'actions.retry': 'Retry with the same key',
  'sessions.approve': 'Approve the agent session',
  'sessions.revoke': 'Revoke the agent session',
  'vault.init': 'Create the vault',
  'vault.unlock': 'Unlock the vault',
  'vault.lock': 'Lock the vault',
  'config.accept': 'Accept the configuration change',
  'credentials.add': 'Add a credential',
  'credentials.remove': 'Remove the credential',
  'config.edit': 'Change the configuration',
  'credential_requests.provision': "Answer the agent's credential request",
  'credential_requests.decline': "Decline the agent's credential request",
  'allowlist.add': 'Always allow the executable of',
  'allowlist.remove': 'Remove the process allowlist entry',
};

const detailCharsMax = 600;

/**
 * The words of the dialog for one decision. A ticket's decision names what the card says the action does
 * (target, method and path or command, credential) from main's own read of the queue: a compromised renderer
 * can ask for "approve #12" but cannot make the dialog describe #12 as something else. Secrets in the input
 * (a credential's value) are never shown.
 */
export function describeDecision(
  method: BrokerApiMethod,
  input: unknown,
  card: ApprovalCard | undefined,
): DecisionDialog {
  const verb = verbs[method] ?? method;
  const fields = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const subject =
    typeof fields['ticket'] === 'number'
      ? ` ticket #${fields['ticket']}`
      : typeof fields['action_id'] === 'string'
        ? ` ${fields['action_id']}`
        : typeof fields['request_id'] === 'string'
          ? ` ${fields['request_id']}`
          : '';
  const named =
    typeof fields['name'] === 'string'
      ? ` “${fields['name']}”`
      : typeof fields['session_id'] === 'string'
        ? ` ${fields['session_id']}`
        : '';
  const lines: string[] = [];
  if (card !== undefined) {
    lines.push(
      `${card.target}: ${card.channel === 'http' ? `${card.method ?? ''} ${card.path ?? ''}` : (card.command ?? '')}`.trim(),
    );
    lines.push(`Credential: ${card.credential}`);
    if (card.session !== null)
      lines.push(`Agent: ${card.session.client_name ?? card.session.exe ?? 'unknown'} (pid ${card.session.pid})`);
    if (card.retry_of !== null) lines.push(`A retry of ${card.retry_of}`);
  }
  if (typeof fields['reason'] === 'string') lines.push(`Reason: ${fields['reason']}`);
  // Agent-chosen text (a path, a command, a client name) may carry line breaks or bidi controls to fake a line.
  const detail = lines.map(neutralised).join('\n');
  return {
    message: `${verb}${subject}${named}?`,
    detail: detail.length <= detailCharsMax ? detail : `${detail.slice(0, detailCharsMax)}…`,
    confirmLabel: verb.split(' ')[0] ?? 'Confirm',
  };
}

/** Control characters (a line break that fakes a line) and bidi overrides (text that reads backwards) become '?'. */
function neutralised(line: string): string {
  let out = '';
  for (const ch of line) {
    const cp = ch.codePointAt(0) ?? 0;
    const hidden = cp < 0x20 || cp === 0x7f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
    out += hidden ? '?' : ch;
  }
  return out;
}
