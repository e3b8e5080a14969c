import type { BrokerApi, BrokerApiMethod, OperatorInput } from '../contract/index.js';
import type { OperatorActor } from '../ports/index.js';

/**
 * What the operator surfaces (HTTP host, control socket, Electron IPC) need from the broker: one
 * function per operator method, given input the handlers already parsed with the contract's
 * schema, and who calls (built per call by the handlers from the surface's caller; decisions
 * record it). The host depends on this seam, never on the journal or the queue directly.
 */
export type OperatorBroker = {
  [M in BrokerApiMethod]: (
    input: OperatorInput<M>,
    actor: OperatorActor,
  ) => BrokerApi[M]['output'] | Promise<BrokerApi[M]['output']>;
};
