import type { z } from 'zod';
import { brokerApiMethods, brokerApiSchemas, isCodedError, type BrokerApi, type BrokerApiMethod, type Reply } from '../contract/index.js';
import type { OperatorBroker } from './operator-broker.js';

/**
 * One handler per BrokerApi method, derived from the contract's method list: each parses its input
 * with the method's schema (INVALID_ARGUMENT names the field) and answers a Reply. The HTTP host,
 * the control socket and the Electron IPC handlers all call these; none has its own logic.
 */
export type OperatorHandlers = {
  [M in BrokerApiMethod]: (input: unknown) => Promise<Reply<BrokerApi[M]['output']>>;
};

export function createOperatorHandlers(broker: OperatorBroker): OperatorHandlers {
  const handlers: Partial<Record<BrokerApiMethod, (input: unknown) => Promise<Reply<unknown>>>> = {};
  for (const method of brokerApiMethods) {
    handlers[method] = (input) => {
      const parsed = (brokerApiSchemas[method].input as z.ZodType).safeParse(input ?? {});
      if (!parsed.success) return Promise.resolve(invalid(parsed.error));
      const call = broker[method] as (value: unknown) => unknown;
      return replyFrom(() => call(parsed.data));
    };
  }
  return handlers as OperatorHandlers;
}

function invalid(error: z.ZodError): Reply<never> {
  const issue = error.issues[0];
  const field = issue === undefined || issue.path.length === 0 ? 'input' : issue.path.map(String).join('.');
  return { ok: false, error: { code: 'INVALID_ARGUMENT', message: `${field}: ${issue?.message ?? 'invalid'}`, field } };
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
