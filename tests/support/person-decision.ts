import type { BrokerApi, BrokerApiMethod } from '../../broker/contract/index.js';
import { controlSocketPath, sendControlRequest } from '../../broker/host/index.js';

/**
 * A decision with a person's proof (the passphrase the CLI reads from a terminal), over the data directory's real
 * control socket. A refusal rejects with an Error carrying the reply's `code`. The daemon must have been unlocked by
 * `unlockAsPerson`, not from a passphrase file (that passphrase proves no person: OPERATOR_PROOF_REQUIRED).
 */
export async function decideAsPerson<M extends BrokerApiMethod>(
  dataDir: string,
  passphrase: string,
  method: M,
  input: BrokerApi[M]['input'],
): Promise<BrokerApi[M]['output']> {
  const reply = await sendControlRequest(controlSocketPath(dataDir), {
    op: 'api',
    method,
    input,
    proof: { passphrase },
  });
  if (!reply.ok) throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
  return reply.value as BrokerApi[M]['output'];
}

/**
 * What `postern vault unlock` sends when a person types the passphrase on its terminal: a daemon started locked (no
 * passphrase file) and unlocked this way takes the passphrase as a person's proof. One started from a passphrase file
 * does not (any process of the user can read that file; docs/vault.md).
 */
export async function unlockAsPerson(dataDir: string, passphrase: string): Promise<void> {
  const reply = await sendControlRequest(controlSocketPath(dataDir), { op: 'unlock', passphrase });
  if (!reply.ok) throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
}
