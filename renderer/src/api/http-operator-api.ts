import type { BrokerApiMethod, BrokerStatus, Reply } from '../../../broker/contract/index.js';
import { clientError, type OperatorApi } from './operator-api.js';

/** Where each method lives on the headless host (broker/host/http-host.ts mirrors this table). */
const routes = {
  status: { verb: 'GET', path: '/api/status' },
} as const satisfies Record<BrokerApiMethod, { verb: 'GET'; path: string }>;

/**
 * The operator API over HTTP for the headless host. Authentication is the HttpOnly session cookie
 * the host set when the tokened URL was opened; this code never sees the token.
 */
export function createHttpOperatorApi(fetchFn: typeof fetch): OperatorApi {
  return {
    status: () => call<BrokerStatus>(fetchFn, 'status'),
  };
}

async function call<T>(fetchFn: typeof fetch, method: BrokerApiMethod): Promise<Reply<T>> {
  const route = routes[method];
  let response: Response;
  try {
    response = await fetchFn(route.path, { method: route.verb, credentials: 'same-origin', headers: { Accept: 'application/json' } });
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
  return body as Reply<T>;
}

function isReply(value: unknown): value is Reply<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { ok?: unknown; value?: unknown; error?: { code?: unknown; message?: unknown } };
  if (candidate.ok === true) return 'value' in candidate;
  return candidate.ok === false && typeof candidate.error?.code === 'string' && typeof candidate.error.message === 'string';
}
