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
  'actions.attest',
  'actions.reconcile',
  'actions.retry',
  'sessions.list',
  'sessions.approve',
  'sessions.revoke',
  'activity.list',
  'metrics',
  'vault.status',
  'vault.unlock',
  'vault.lock',
  'credentials.list',
  'credentials.add',
  'credentials.remove',
  'audit.verify',
  'audit.last',
  'config.show',
  'config.edit',
] as const;
export type BrokerApiMethod = (typeof brokerApiMethods)[number];

/** Methods that only read: the HTTP host also answers them on GET with an empty input. */
export const brokerApiReadMethods: ReadonlySet<BrokerApiMethod> = new Set<BrokerApiMethod>([
  'status',
  'approvals.list',
  'sessions.list',
  'metrics',
  'vault.status',
  'credentials.list',
  'audit.last',
  'config.show',
]);
