import type { BrokerApiMethod, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import { clientError, type OperatorApi } from './operator-api.js';

/**
 * The operator API over HTTP for the headless host: POST /api/<method> with the input as JSON (the
 * host's table in broker/host/http-host.ts is derived from the same method list). Authentication is
 * the HttpOnly session cookie the host set when the tokened URL was opened; this code never sees
 * the token.
 */
export function createHttpOperatorApi(fetchFn: typeof fetch): OperatorApi {
  return Object.fromEntries(brokerApiMethods.map((method) => [method, (input: unknown) => call(fetchFn, method, input)])) as OperatorApi;
}

async function call(fetchFn: typeof fetch, method: BrokerApiMethod, input: unknown): Promise<Reply<unknown>> {
  let response: Response;
  try {
    response = await fetchFn(`/api/${method}`, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
      body: JSON.stringify(input ?? {}),
    });
  } catch {
    return clientError('BROKER_UNREACHABLE', 'The broker did not answer. Is the daemon still running?');
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    return clientError('BAD_REPLY', `The broker answered HTTP ${response.status} without a JSON reply.`);
  }
  if (!isReply(body)) return clientError('BAD_REPLY', `The broker answered HTTP ${response.status} with an unexpected body.`);
  return body;
}

function isReply(value: unknown): value is Reply<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { ok?: unknown; value?: unknown; error?: { code?: unknown; message?: unknown } };
  if (candidate.ok === true) return 'value' in candidate;
  return candidate.ok === false && typeof candidate.error?.code === 'string' && typeof candidate.error.message === 'string';
}
