import type { BrokerApi, BrokerApiMethod, Reply } from '../../../broker/contract/index.js';

/**
 * The renderer's one way to reach the broker: the contract's BrokerApi map as async calls that
 * always resolve to a Reply. Components and stores get it injected and never call fetch or the
 * bridge themselves.
 */
export type OperatorApi = {
  [M in BrokerApiMethod]: (input: BrokerApi[M]['input']) => Promise<Reply<BrokerApi[M]['output']>>;
};

export type ReplyError = Extract<Reply<unknown>, { ok: false }>['error'];

/** Codes the renderer itself produces when no Reply came back; the broker's codes pass through. */
export const clientErrorMeanings = {
  BROKER_UNREACHABLE: 'The request did not reach the broker (daemon stopped, network error).',
  BAD_REPLY: 'The broker answered, but not with a Reply this UI understands.',
} as const;
export type ClientErrorCode = keyof typeof clientErrorMeanings;

export function clientError(code: ClientErrorCode, message: string): { ok: false; error: ReplyError } {
  return { ok: false, error: { code, message } };
}

declare global {
  interface Window {
    /** Present only inside the Electron shell: the preload's allow-listed bridge. */
    readonly postern?: OperatorApi;
  }
}
