/**
 * The operator API's method names, with no runtime dependency (the sandboxed preload bundles this
 * file alone). broker/contract/operator-api.ts holds their schemas and must name exactly these.
 */
export const brokerApiMethods = [
  'status',
  'approvals.list',
  'approvals.approve',
  'approvals.reject',
  'approvals.cancel',
  'approvals.abandon',
  'actions.show',
  'actions.list',
  'actions.attest',
  'actions.reconcile',
  'actions.retry',
  'actions.precheck',
  'actions.recording',
  'sessions.list',
  'sessions.approve',
  'sessions.revoke',
  'activity.list',
  'metrics',
  'vault.status',
  'vault.init',
  'vault.unlock',
  'vault.lock',
  'agent.hookup',
  'credentials.list',
  'credentials.add',
  'credentials.remove',
  'audit.verify',
  'audit.last',
  'config.show',
  'config.edit',
  'config.pending',
  'config.accept',
  'credential_requests.list',
  'credential_requests.provision',
  'credential_requests.decline',
  'mcp_servers.authorize',
  'allowlist.list',
  'allowlist.preview',
  'allowlist.add',
  'allowlist.remove',
  'integrity.anchor',
  'integrity.readopt',
] as const;
export type BrokerApiMethod = (typeof brokerApiMethods)[number];

/** Methods that only read: the HTTP host also answers them on GET with an empty input. */
export const brokerApiReadMethods: ReadonlySet<BrokerApiMethod> = new Set<BrokerApiMethod>([
  'status',
  'approvals.list',
  'actions.list',
  'sessions.list',
  'metrics',
  'vault.status',
  'agent.hookup',
  'credentials.list',
  'audit.last',
  'config.show',
  'config.pending',
  'credential_requests.list',
  'allowlist.list',
  'integrity.anchor',
]);

/**
 * Every operator method is a read or a decision, here and nowhere else (THREAT-MODEL "only a person
 * decides"). A decision is accepted only from a surface that proves a person: the desktop window,
 * the operator UI after sign-in by a tab that presented the vault passphrase in this run (the sign-in code alone proves
 * only that the caller read the daemon's output: broker/host/web-proof.ts), or the CLI with the vault passphrase typed
 * on its terminal; the
 * control socket refuses one without that proof unless `operator.unattended_decisions` is set, and
 * then the journal names the process, never a person. Reads need no proof. A method added to the
 * list above fails to compile until it is classified here.
 */
export const operatorMethodClass = {
  status: 'read',
  'approvals.list': 'read',
  'approvals.approve': 'decision',
  'approvals.reject': 'decision',
  'approvals.cancel': 'decision',
  'approvals.abandon': 'decision',
  'actions.show': 'read',
  'actions.list': 'read',
  'actions.attest': 'decision',
  // Runs the route's lookup with the credential and records what it learned on the person's word.
  'actions.reconcile': 'decision',
  'actions.retry': 'decision',
  // Whether a reconcile or retry of this action could go as far as the remote: its refusals only, nothing sent.
  'actions.precheck': 'read',
  // An SSH action's session recording (asciicast v2), opened: output as the agent received it, scrubbed.
  'actions.recording': 'read',
  'sessions.list': 'read',
  'sessions.approve': 'decision',
  'sessions.revoke': 'decision',
  'activity.list': 'read',
  metrics: 'read',
  'vault.status': 'read',
  // Creating the vault chooses the passphrase every later unlock and proof is checked against.
  'vault.init': 'decision',
  'vault.unlock': 'decision',
  // Locking takes capability away, but an agent that can lock at will stops every dispatch.
  'vault.lock': 'decision',
  // Paths only (node, bin, data directory): what `postern agent-config` prints.
  'agent.hookup': 'read',
  'credentials.list': 'read',
  'credentials.add': 'decision',
  'credentials.remove': 'decision',
  'audit.verify': 'read',
  'audit.last': 'read',
  'config.show': 'read',
  'config.edit': 'decision',
  // What postern.yaml changed since a person last accepted it; accepting it is that person's decision.
  'config.pending': 'read',
  'config.accept': 'decision',
  // An agent's request for a credential, as a person sees it (sanitized text; never a value).
  'credential_requests.list': 'read',
  // Puts a secret in the vault (or binds one) and tells the agent its name: a person's answer, like credentials.add.
  'credential_requests.provision': 'decision',
  'credential_requests.decline': 'decision',
  // Starts an OAuth authorization whose grant lets the broker act on a remote for agents: a person's consent.
  'mcp_servers.authorize': 'decision',
  // Executables whose processes skip the session card (docs/queue.md); changing that set is a person's decision.
  'allowlist.list': 'read',
  // The path and sha256 the broker computes for a session's executable (or a file): shown on the card before the add.
  'allowlist.preview': 'read',
  'allowlist.add': 'decision',
  'allowlist.remove': 'decision',
  // What the start found of the signed integrity anchor (docs/audit.md).
  'integrity.anchor': 'read',
  // Adopting a journal the anchor disagrees with vouches for its history: a person's word, like accepting a config.
  'integrity.readopt': 'decision',
} as const satisfies Record<BrokerApiMethod, 'read' | 'decision'>;

/**
 * Decisions the control socket refuses whatever proof or opt-out comes with them. `vault.init` has no
 * passphrase to prove yet, and inside the running broker it leaves the vault unlocked and seals the
 * first-use configuration (config-integrity.ts): over a socket every process of the user reaches, an agent
 * would create, unlock and seal with a passphrase it knows, and no person would be asked. A vault made
 * outside the broker (`postern vault init` at a terminal) stays locked in it until someone who knows the
 * passphrase unlocks it. The desktop window and the signed-in operator UI offer it (docs/vault.md).
 */
export const controlSocketRefusedMethods: ReadonlySet<BrokerApiMethod> = new Set<BrokerApiMethod>(['vault.init']);

export function isDecisionMethod(method: BrokerApiMethod): boolean {
  return operatorMethodClass[method] === 'decision';
}
