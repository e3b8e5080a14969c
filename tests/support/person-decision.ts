import type { BrokerApi, BrokerApiMethod } from '../../broker/contract/index.js';
import { controlSocketPath, sendControlRequest } from '../../broker/host/index.js';

/**
 * A decision with a person's proof (the passphrase the CLI reads from a terminal), over the data directory's real
 * control socket. A refusal rejects with an Error carrying the reply's `code`.
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
