import type { BrokerApi, BrokerApiMethod, Reply } from '../contract/index.js';
import { isCodedError } from '../contract/index.js';
import type { OperatorBroker } from './operator-broker.js';

/**
 * One handler per BrokerApi method. A mapped type over the contract's map, so adding a method to
 * BrokerApi without a handler here fails to compile (Signal's `ts/sql/main.main.ts` habit). The HTTP
 * host and the Electron IPC handlers both call these; neither has its own logic.
 */
export type OperatorHandlers = {
  [M in BrokerApiMethod]: (input: BrokerApi[M]['input']) => Promise<Reply<BrokerApi[M]['output']>>;
};

export function createOperatorHandlers(broker: OperatorBroker): OperatorHandlers {
  return {
    status: () => replyFrom(() => broker.status()),
  };
}

/** Operating errors with a code travel as a coded Reply; anything else is a bug, reported as INTERNAL. */
async function replyFrom<T>(produce: () => T | Promise<T>): Promise<Reply<T>> {
  try {
    return { ok: true, value: await produce() };
  } catch (error) {
    if (isCodedError(error)) {
      const reply: Reply<T> = { ok: false, error: { code: error.code, message: error.message } };
      if (error.field !== undefined) reply.error.field = error.field;
      return reply;
    }
    return { ok: false, error: { code: 'INTERNAL', message: 'The broker failed to answer; see its log.' } };
  }
}
