import type { BrokerApiMethod, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import { clientError, type OperatorApi } from './operator-api.js';
import type { OperatorSession } from './page-session.js';

/**
 * The operator API over HTTP for the headless host: POST /api/<method> with the input as JSON (the
 * host's table in broker/host/http-host.ts is derived from the same method list), authenticated by
 * `Authorization: Bearer <session secret>`, the secret this page took at sign-in and holds in memory only
 * (./page-session.ts). It is read on every call. No cookie is sent: the host sets none.
 */
export function createHttpOperatorApi(
  fetchFn: typeof fetch,
  session: Pick<OperatorSession, 'secret' | 'refused'> | undefined,
): OperatorApi {
  const entries = brokerApiMethods.map((method) => [method, (input: unknown) => call(fetchFn, session, method, input)]);
  return Object.fromEntries(entries) as OperatorApi;
}

async function call(
  fetchFn: typeof fetch,
  session: Pick<OperatorSession, 'secret' | 'refused'> | undefined,
  method: BrokerApiMethod,
  input: unknown,
): Promise<Reply<unknown>> {
  const headers: Record<string, string> = { Accept: 'application/json', 'Content-Type': 'application/json' };
  const secret = session?.secret() ?? null;
  // Without a secret the host answers 401 UNAUTHENTICATED with the way to sign in; the UI shows it.
  if (secret !== null) headers['Authorization'] = `Bearer ${secret}`;
  const answer = await postJson(fetchFn, `/api/${method}`, headers, input ?? {});
  if ('error' in answer) return answer;
  const { status, body } = answer;
  if (!isReply(body)) return clientError('BAD_REPLY', `The broker answered HTTP ${status} with an unexpected body.`);
  // The host no longer knows this secret (another run of the daemon, or signed out as the oldest of its tabs).
  if (!body.ok && body.error.code === 'UNAUTHENTICATED' && secret !== null) session?.refused(secret);
  return body;
}

/**
 * POSTs `input` as JSON to this page's own origin (no cookie: `credentials: 'omit'`) and reads the JSON it answers
 * with, or says why there is none (BROKER_UNREACHABLE, BAD_REPLY).
 */
export async function postJson(
  fetchFn: typeof fetch,
  path: string,
  headers: Record<string, string>,
  input: unknown,
): Promise<{ status: number; body: unknown } | ReturnType<typeof clientError>> {
  let response: Response;
  try {
    response = await fetchFn(path, { method: 'POST', credentials: 'omit', headers, body: JSON.stringify(input) });
  } catch {
    return clientError('BROKER_UNREACHABLE', 'The broker did not answer. Is the daemon still running?');
  }
  try {
    return { status: response.status, body: (await response.json()) as unknown };
  } catch {
    return clientError('BAD_REPLY', `The broker answered HTTP ${response.status} without a JSON reply.`);
  }
}

function isReply(value: unknown): value is Reply<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { ok?: unknown; value?: unknown; error?: { code?: unknown; message?: unknown } };
  if (candidate.ok === true) return 'value' in candidate;
  return (
    candidate.ok === false && typeof candidate.error?.code === 'string' && typeof candidate.error.message === 'string'
  );
}
