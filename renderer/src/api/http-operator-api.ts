import type { BrokerApiMethod, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import { clientError, type OperatorApi } from './operator-api.js';

/**
 * Where the host's sign-in page (broker/host/sign-in-page.ts, same key) left the session secret.
 * sessionStorage belongs to this origin — scheme, host and port — and this tab, so a page on
 * another port of 127.0.0.1 cannot read it, and unlike a cookie the browser never sends it anywhere.
 */
export const operatorSessionKey = 'postern.operatorSession';

/** The part of sessionStorage this client uses. */
export type SessionStore = Pick<Storage, 'getItem'>;

/**
 * The operator API over HTTP for the headless host: POST /api/<method> with the input as JSON (the
 * host's table in broker/host/http-host.ts is derived from the same method list), authenticated by
 * `Authorization: Bearer <session secret>`. The secret is read on every call, so a reload or a
 * sign-in after this client was made is seen. No cookie is sent: the host sets none.
 */
export function createHttpOperatorApi(
  fetchFn: typeof fetch,
  store: SessionStore | undefined = browserSessionStore(),
): OperatorApi {
  const entries = brokerApiMethods.map((method) => [method, (input: unknown) => call(fetchFn, store, method, input)]);
  return Object.fromEntries(entries) as OperatorApi;
}

function browserSessionStore(): SessionStore | undefined {
  return typeof sessionStorage === 'undefined' ? undefined : sessionStorage;
}

async function call(
  fetchFn: typeof fetch,
  store: SessionStore | undefined,
  method: BrokerApiMethod,
  input: unknown,
): Promise<Reply<unknown>> {
  const headers: Record<string, string> = { Accept: 'application/json', 'Content-Type': 'application/json' };
  const session = store?.getItem(operatorSessionKey) ?? null;
  // Without a secret the host answers 401 UNAUTHENTICATED with the way to sign in; the UI shows it.
  if (session !== null) headers['Authorization'] = `Bearer ${session}`;
  let response: Response;
  try {
    response = await fetchFn(`/api/${method}`, {
      method: 'POST',
      credentials: 'omit',
      headers,
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
  if (!isReply(body))
    return clientError('BAD_REPLY', `The broker answered HTTP ${response.status} with an unexpected body.`);
  return body;
}

function isReply(value: unknown): value is Reply<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { ok?: unknown; value?: unknown; error?: { code?: unknown; message?: unknown } };
  if (candidate.ok === true) return 'value' in candidate;
  return (
    candidate.ok === false && typeof candidate.error?.code === 'string' && typeof candidate.error.message === 'string'
  );
}
