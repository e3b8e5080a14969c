import type { BrokerApi, BrokerApiMethod, OperatorUiErrorCode, Reply } from '../../../broker/contract/index.js';

/**
 * The renderer's one way to reach the broker: the contract's BrokerApi map as async calls that
 * always resolve to a Reply. Components and stores get it injected and never call fetch or the
 * bridge themselves.
 */
export type OperatorApi = {
  [M in BrokerApiMethod]: (input: BrokerApi[M]['input']) => Promise<Reply<BrokerApi[M]['output']>>;
};

export type ReplyError = Extract<Reply<unknown>, { ok: false }>['error'];

/**
 * Codes the renderer itself produces when no Reply came back (the registry's `operator_ui` codes,
 * with their meanings, in broker/contract/error-codes.ts); the broker's codes pass through.
 */
export type ClientErrorCode = OperatorUiErrorCode;

export function clientError(code: ClientErrorCode, message: string): { ok: false; error: ReplyError } {
  return { ok: false, error: { code, message } };
}

declare global {
  interface Window {
    /** Present only inside the Electron shell: the preload's allow-listed bridge. */
    readonly postern?: OperatorApi;
  }
}
