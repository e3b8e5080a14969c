import os from 'node:os';
import type { z } from 'zod';
import {
  brokerApiMethods,
  brokerApiSchemas,
  isCodedError,
  isDecisionMethod,
  type BrokerApi,
  type BrokerApiMethod,
  type OperatorAuth,
  type OperatorSurface,
  type Reply,
} from '../contract/index.js';
import { sealedForGood } from '../journal/index.js';
import type { OperatorActor } from '../ports/index.js';
import type { OperatorBroker } from './operator-broker.js';

/**
 * Who is calling, as the surface that received the call established it. A person's surface says
 * how it proved one; under the unattended opt-out the control socket names the process (its
 * kernel-reported executable and pid) and no person is ever recorded.
 */
export type OperatorCaller =
  | { readonly surface: OperatorSurface; readonly auth: Exclude<OperatorAuth, 'unattended_opt_out'> }
  | {
      readonly surface: 'cli';
      readonly auth: 'unattended_opt_out';
      readonly process: { readonly exe: string | null; readonly pid: number };
    };

/**
 * One handler per BrokerApi method, derived from the contract's method list: each parses its input
 * with the method's schema (INVALID_ARGUMENT names the field) and answers a Reply. The HTTP host,
 * the control socket and the Electron IPC handlers all call these; none has its own logic. A
 * decision (contract `operatorMethodClass`) without a caller is refused: every surface must say
 * who it is and how it knows.
 */
export type OperatorHandlers = {
  [M in BrokerApiMethod]: (input: unknown, caller?: OperatorCaller) => Promise<Reply<BrokerApi[M]['output']>>;
};

export function createOperatorHandlers(broker: OperatorBroker, options: { personId?: string } = {}): OperatorHandlers {
  const personId = options.personId ?? operatorName();
  const handlers: Partial<
    Record<BrokerApiMethod, (input: unknown, caller?: OperatorCaller) => Promise<Reply<unknown>>>
  > = {};
  for (const method of brokerApiMethods) {
    handlers[method] = (input, caller) => {
      const parsed = (brokerApiSchemas[method].input as z.ZodType).safeParse(input ?? {});
      if (!parsed.success) return Promise.resolve(invalid(parsed.error));
      if (caller === undefined && isDecisionMethod(method)) {
        return Promise.resolve({
          ok: false,
          error: {
            code: 'OPERATOR_PROOF_REQUIRED',
            message: `${method} is a decision: the surface must say who decides`,
            field: 'op',
          },
        });
      }
      const call = broker[method] as (value: unknown, actor: OperatorActor) => unknown;
      const actor = caller === undefined ? readerActor(personId) : actorOf(caller, personId);
      return replyFrom(() => call(parsed.data, actor));
    };
  }
  return handlers as OperatorHandlers;
}

/** The journal's actor for a caller: a person on a proving surface, else the process, never a person. */
export function actorOf(caller: OperatorCaller, personId: string): OperatorActor {
  if (caller.auth === 'unattended_opt_out') {
    const exe = (caller.process.exe ?? 'unknown-exe').slice(0, 160);
    return { kind: 'process', id: `${exe} pid ${caller.process.pid}`, surface: caller.surface, auth: caller.auth };
  }
  return { kind: 'person', id: personId, surface: caller.surface, auth: caller.auth };
}

/** Reads record nothing; a read with no caller (the desktop's own approval watcher) gets a placeholder. */
function readerActor(personId: string): OperatorActor {
  return { kind: 'person', id: personId };
}

/** The person a proven decision names: the OS user running the broker (the proof says it is a person, not who). */
export function operatorName(): string {
  try {
    return os.userInfo().username.slice(0, 200) || 'operator';
  } catch {
    return 'operator';
  }
}

function invalid(error: z.ZodError): Reply<never> {
  const issue = error.issues[0];
  const field = issue === undefined || issue.path.length === 0 ? 'input' : issue.path.map(String).join('.');
  return { ok: false, error: { code: 'INVALID_ARGUMENT', message: `${field}: ${issue?.message ?? 'invalid'}`, field } };
}

/**
 * Operating errors with a code travel as a coded Reply; anything else is a bug, reported as INTERNAL. What a run that
 * never had a key sealed says so (`sealed_for_good`), so a surface never asks for an unlock that opens nothing.
 */
async function replyFrom<T>(produce: () => T | Promise<T>): Promise<Reply<T>> {
  try {
    return { ok: true, value: await produce() };
  } catch (error) {
    if (isCodedError(error)) {
      const reply: Reply<T> = { ok: false, error: { code: error.code, message: error.message } };
      if (error.field !== undefined) reply.error.field = error.field;
      if (sealedForGood(error)) reply.error.sealed_for_good = true;
      return reply;
    }
    return { ok: false, error: { code: 'INTERNAL', message: 'The broker failed to answer; see its log.' } };
  }
}
