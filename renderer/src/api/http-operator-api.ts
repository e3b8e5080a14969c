import type { BrokerApiMethod, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import { clientError, type OperatorApi } from './operator-api.js';
import type { OperatorSession } from './page-session.js';
import { asksForPassphrase, type PassphrasePrompt } from './person-proof.js';

/**
 * The operator API over HTTP for the headless host: POST /api/<method> with the input as JSON (the
 * host's table in broker/host/http-host.ts is derived from the same method list), authenticated by
 * `Authorization: Bearer <session secret>`, the secret this page took at sign-in and holds in memory only
 * (./page-session.ts). It is read on every call. No cookie is sent: the host sets none.
 */
export function createHttpOperatorApi(
  fetchFn: typeof fetch,
  session: Pick<OperatorSession, 'secret' | 'refused'> | undefined,
  prompt?: PassphrasePrompt,
): OperatorApi {
  const proof: ProofState | undefined =
    prompt === undefined ? undefined : { prompt, proofs: 0, queue: Promise.resolve() };
  const entries = brokerApiMethods.map((method) => [
    method,
    (input: unknown) => callProven({ fetchFn, session, proof }, method, input),
  ]);
  return Object.fromEntries(entries) as OperatorApi;
}

/** This tab's passphrase proofs: the prompt, how many succeeded, and the one ask-and-prove running at a time. */
interface ProofState {
  readonly prompt: PassphrasePrompt;
  proofs: number;
  queue: Promise<unknown>;
}

interface CallContext {
  readonly fetchFn: typeof fetch;
  readonly session: Pick<OperatorSession, 'secret' | 'refused'> | undefined;
  readonly proof: ProofState | undefined;
}

/**
 * A call, and for a decision the host refused because this tab has not presented the vault passphrase in this run
 * (broker/host/web-proof.ts): the person is asked for it (`prompt`), the tab proves itself, and the decision is sent
 * once more. Cancelled, the refusal is the answer; a wrong passphrase or a backoff is shown on the next ask. One ask
 * at a time: a decision refused while another proved the tab is sent again without asking, and one made in a session
 * that is gone (signed out, signed in again) is never sent again.
 */
async function callProven(ctx: CallContext, method: BrokerApiMethod, input: unknown): Promise<Reply<unknown>> {
  const { proof, session } = ctx;
  const proofsBefore = proof?.proofs ?? 0;
  const secretBefore = session?.secret() ?? null;
  const reply = await call(ctx.fetchFn, session, method, input);
  if (proof === undefined || reply.ok || !asksForPassphrase(reply)) return reply;
  const turn = proof.queue.then(() => askAndResend(ctx, proof, method, input, reply, { proofsBefore, secretBefore }));
  proof.queue = turn.catch(() => undefined);
  return turn;
}

async function askAndResend(
  ctx: CallContext,
  proof: ProofState,
  method: BrokerApiMethod,
  input: unknown,
  refused: Reply<unknown> & { ok: false },
  before: { proofsBefore: number; secretBefore: string | null },
): Promise<Reply<unknown>> {
  const { fetchFn, session } = ctx;
  const sameSession = (): boolean =>
    (session?.secret() ?? null) === before.secretBefore && before.secretBefore !== null;
  if (!sameSession()) return refused;
  if (proof.proofs !== before.proofsBefore) {
    const again = await call(fetchFn, session, method, input);
    if (again.ok || !asksForPassphrase(again)) return again;
  }
  let error: { code: string; message: string } | null = null;
  for (;;) {
    const passphrase = await proof.prompt.ask({ why: refused.error.message, error });
    if (passphrase === null || !sameSession()) return refused;
    const secret = before.secretBefore as string;
    const proven = await proveTab(fetchFn, secret, passphrase);
    if (proven.ok) {
      proof.proofs += 1;
      return call(fetchFn, session, method, input);
    }
    if (proven.error.code === 'UNAUTHENTICATED') {
      session?.refused(secret);
      return proven;
    }
    // A daemon that cannot take a passphrase as proof (from a file) answers so: asking again would not help.
    if (proven.error.code === 'OPERATOR_PROOF_REQUIRED') return proven;
    error = { code: proven.error.code, message: proven.error.message };
  }
}

/** POST /auth/prove with this tab's secret: the host marks the session as a person's, or says why not. */
export async function proveTab(fetchFn: typeof fetch, secret: string, passphrase: string): Promise<Reply<unknown>> {
  const headers = {
    Accept: 'application/json',
    'Content-Type': 'application/json',
    Authorization: `Bearer ${secret}`,
  };
  const answer = await postJson(fetchFn, '/auth/prove', headers, { passphrase });
  if ('error' in answer) return answer;
  if (!isReply(answer.body))
    return clientError('BAD_REPLY', `The broker answered HTTP ${answer.status} with an unexpected body.`);
  return answer.body;
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
