import type { Logger } from 'pino';
import type { CredentialRequests, ProvisionedCredential } from '../actions/index.js';
import { CodedError } from '../contract/index.js';
import type { Vault } from '../vault/index.js';
import type { OperatorBroker } from './operator-broker.js';
import { addCredential, summary } from './operator-vault.js';

type CredentialRequestMethods =
  'credential_requests.list' | 'credential_requests.provision' | 'credential_requests.decline';

/**
 * The operator methods over agents' credential requests. Provisioning adds the secret through credentials.add's own
 * path (addCredential), or binds a credential the vault holds; only then is the request answered, with the
 * credential's id and name. The secret goes into the vault and nowhere else: the reply is its metadata.
 */
export function createCredentialRequestOperator(deps: {
  requests: CredentialRequests;
  vault: Vault;
  logger: Logger;
}): Pick<OperatorBroker, CredentialRequestMethods> {
  const { requests, vault, logger } = deps;
  return {
    'credential_requests.list': () => ({ requests: requests.list() }),
    'credential_requests.provision': async (input, actor) => {
      const give = (): Promise<ProvisionedCredential> =>
        'credential' in input
          ? addCredential(vault, logger, input.credential).then((info) => ({ info, how: 'added' as const }))
          : bindExisting(vault, input.existing, input.add_binding);
      const { provisioned, journal_seq } = await requests.provision(input.request_id, actor, give);
      return {
        request_id: input.request_id,
        status: 'provisioned' as const,
        how: provisioned.how,
        credential: summary(provisioned.info),
        journal_seq,
      };
    },
    'credential_requests.decline': async (input, actor) => {
      const { journal_seq } = await requests.decline(input.request_id, actor, input.reason);
      return { request_id: input.request_id, status: 'declined' as const, journal_seq };
    },
  };
}

/** A credential the vault already holds, with one more binding if the person added one (sealed again by the vault). */
async function bindExisting(
  vault: Vault,
  name: string,
  addBinding: string | undefined,
): Promise<ProvisionedCredential> {
  const info = vault.describe(name);
  if (info === undefined)
    throw new CodedError('UNKNOWN_CREDENTIAL', 'the vault holds no credential of that name', { field: 'existing' });
  if (addBinding === undefined || info.bindings.includes(addBinding)) return { info, how: 'bound_existing' };
  const rebound = await vault.rebind(name, [...info.bindings, addBinding]);
  vault.touch();
  return { info: rebound, how: 'bound_existing' };
}
