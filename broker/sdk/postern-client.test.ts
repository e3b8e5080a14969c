import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import { startAgentSocket, agentSocketPath, type AgentSocket } from '../agent/index.js';
import type { AgentRouteList, EnvelopeError } from '../contract/index.js';
import {
  envelopeAnswer,
  holdUntilAborted,
  scriptedEnvelope,
  scriptedRouteList,
  ScriptedAgentBackend,
} from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { agentSocketRelativePath, connectPostern, type ActionReply, type PosternClient } from './postern-client.js';
import { PosternActionError, PosternConnectionError } from './postern-error.js';
import { nextRetry, type RetryOptions } from './retry-policy.js';

let dir: TempDir;
let backend: ScriptedAgentBackend;
let socket: AgentSocket;
const clients: PosternClient[] = [];

beforeEach(async () => {
  dir = createTempDir('postern-sdk-');
  backend = new ScriptedAgentBackend();
  socket = await startAgentSocket({ dataDir: dir.path, backend });
});
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await socket.close();
  dir.remove();
});

async function connect(retry?: RetryOptions): Promise<PosternClient> {
  const client = await connectPostern({ dataDir: dir.path, clientName: 'sdk-test', ...(retry ? { retry } : {}) });
  clients.push(client);
  return client;
}

function failing(error: EnvelopeError, invocationId = 'act_failed'): () => ReturnType<typeof envelopeAnswer> {
  return () => envelopeAnswer(scriptedEnvelope(invocationId, error));
}

const throttled: EnvelopeError = {
  code: 'REMOTE_THROTTLED',
  phase: 'remote_execution',
  outcome: 'rejected',
  retry: 'backoff',
  message: 'slow down',
  retry_after_ms: 5,
};
const unknownSameKey: EnvelopeError = {
  code: 'REMOTE_OUTCOME_UNKNOWN',
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'same_idempotency_key',
  message: 'no answer',
};
const reconcile: EnvelopeError = {
  code: 'REMOTE_OUTCOME_UNKNOWN',
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  message: 'look it up',
};
const never: EnvelopeError = {
  code: 'APPROVAL_DENIED',
  phase: 'validation',
  outcome: 'not_attempted',
  retry: 'never',
  message: 'a person said no',
};

describe('when the SDK connects', () => {
  it('finds the socket under the data directory, where the broker puts it', () => {
    expect(path.join(dir.path, agentSocketRelativePath)).toBe(agentSocketPath(dir.path));
  });

  it('says clearly when no broker is listening', async () => {
    const empty = createTempDir('postern-sdk-empty-');
    try {
      await expect(connectPostern({ dataDir: empty.path })).rejects.toMatchObject({
        name: 'PosternConnectionError',
        code: 'BROKER_NOT_RUNNING',
      });
    } finally {
      empty.remove();
    }
  });

  it('surfaces a connection refusal with its code', async () => {
    const refusing = createTempDir('postern-sdk-refusing-');
    const other = await startAgentSocket({ dataDir: refusing.path, backend, ownUid: (process.getuid?.() ?? 0) + 1 });
    try {
      const error = await connectPostern({ dataDir: refusing.path }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PosternConnectionError);
      expect(error).toMatchObject({ code: 'PEER_REFUSED' });
    } finally {
      await other.close();
      refusing.remove();
    }
  });

  it('needs a data directory or a socket path', async () => {
    const saved = process.env['POSTERN_DATA_DIR'];
    delete process.env['POSTERN_DATA_DIR'];
    try {
      await expect(connectPostern({})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      if (saved !== undefined) process.env['POSTERN_DATA_DIR'] = saved;
    }
  });
});

describe('when calls succeed', () => {
  it('returns typed, parsed results for every tool', async () => {
    const client = await connect();
    const http = await client.httpRequest({ route: 'github', method: 'GET', path: '/repos' });
    expectTypeOf(http).toEqualTypeOf<ActionReply>();
    expect(http.invocation_id).toMatch(/^act_/);
    expect(http.response?.status).toBe(200);
    const ssh = await client.sshExec({ host: 'build-box', command: 'uptime' });
    expect(ssh.output?.exit_status).toBe(0);
    for (const reply of [
      await client.actionStatus('act_1'),
      await client.fetchResult('act_1'),
      await client.cancelAction('act_1'),
    ]) {
      expect(reply.effect).toBe('succeeded');
    }
    const routes = await client.listRoutes();
    expectTypeOf(routes).toEqualTypeOf<AgentRouteList>();
    expect(routes).toEqual(scriptedRouteList);
    expect(backend.calls.map((call) => [call.tool, call.args])).toEqual([
      ['http_request', { route: 'github', method: 'GET', path: '/repos' }],
      ['ssh_exec', { host: 'build-box', command: 'uptime' }],
      ['action_status', { action_id: 'act_1' }],
      ['fetch_result', { action_id: 'act_1' }],
      ['cancel_action', { action_id: 'act_1' }],
      ['list_routes', {}],
    ]);
    expect(backend.sessionsOpened[0]?.client.name).toBe('sdk-test');
  });
});

describe('when a call fails', () => {
  it('throws PosternActionError with the whole envelope', async () => {
    backend.respond = failing(never, 'act_denied');
    const client = await connect();
    const error = await client.httpRequest({ route: 'github', method: 'POST', path: '/x' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PosternActionError);
    const actionError = error as PosternActionError;
    expect(actionError.code).toBe('APPROVAL_DENIED');
    expect(actionError.retry).toBe('never');
    expect(actionError.invocationId).toBe('act_denied');
    expect(actionError.envelope).toMatchObject({ invocation_id: 'act_denied', error: never });
    expect(actionError.isRefusal()).toBe(false);
  });

  it('throws a refusal (no action) as PosternActionError too', async () => {
    const client = await connect();
    backend.respond = () => ({
      isError: true,
      structured: {
        invocation_id: null,
        error: {
          code: 'INVALID_ARGUMENT',
          phase: 'validation',
          outcome: 'not_attempted',
          retry: 'after_correction',
          message: 'bad id',
          field: 'action_id',
        },
      },
      text: 'bad',
    });
    const error = (await client.actionStatus('').catch((e: unknown) => e)) as PosternActionError;
    expect(error).toBeInstanceOf(PosternActionError);
    expect(error.isRefusal()).toBe(true);
    expect(error.envelope.error).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'action_id' });
  });

  it('cancels through an AbortSignal, and the broker sees "cancelled"', async () => {
    backend.respond = holdUntilAborted;
    const client = await connect();
    const controller = new AbortController();
    const pending = client
      .httpRequest({ route: 'github', method: 'GET', path: '/' }, { signal: controller.signal })
      .then(
        () => 'answered',
        () => 'rejected',
      );
    const call = await backend.nextCall();
    controller.abort();
    expect(await call.aborted).toBe('cancelled');
    expect(await pending).toBe('rejected');
  });
});

describe('when the broker goes away before it answers', () => {
  it('throws CONNECTION_LOST naming the action the call recorded, which the broker named once it was durable', async () => {
    const client = await connect();
    backend.respond = (call) => {
      if (call.onRecorded === undefined) throw new Error('the SDK did not declare postern.action_recorded');
      call.onRecorded('act_sdk_recorded');
      return holdUntilAborted(call);
    };
    const lost = client.httpRequest({ route: 'github', method: 'POST', path: '/x' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await backend.nextCall();
    // An answer after the notification proves the SDK read it before the socket goes.
    backend.respond = () => ({ isError: false, structured: scriptedRouteList, text: 'routes' });
    await client.listRoutes();
    await socket.close();
    const error = await lost;
    expect(error).toBeInstanceOf(PosternConnectionError);
    expect(error).toMatchObject({ code: 'CONNECTION_LOST', actionId: 'act_sdk_recorded' });
    expect(String((error as Error).message)).toContain('actionStatus("act_sdk_recorded")');
  });

  it('says the broker named no action when it had not, and names none', async () => {
    const client = await connect();
    backend.respond = holdUntilAborted;
    const lost = client.sshExec({ host: 'h', command: 'true' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await backend.nextCall();
    await socket.close();
    const error = await lost;
    expect(error).toMatchObject({ code: 'CONNECTION_LOST', actionId: undefined });
    expect(String((error as Error).message)).toContain('named no action');
  });

  it('a call made after the connection closed (an eviction, a broker gone) is CONNECTION_LOST, sent nowhere', async () => {
    const client = await connect();
    await socket.close();
    const error = await client.listRoutes().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PosternConnectionError);
    expect(error).toMatchObject({ code: 'CONNECTION_LOST' });
    expect(String((error as Error).message)).toContain('is closed');
  });
});

describe('listRoutes over list_routes pages', () => {
  const route = (name: string): AgentRouteList['routes'][number] => ({
    name,
    methods: ['GET'],
    approval: 'none',
    idempotency_contract: false,
    base_path: '/',
    rules: [],
  });
  /** What the broker's list_digest is to these tests: one value per listing. */
  const digestOfNames = (names: readonly string[]): string =>
    `sha256:${createHash('sha256').update(names.join('\n')).digest('hex')}`;
  /** The broker's paging over `names` (two entries a page), the config being `configs()` when each page is asked. */
  const pagesOf = (configs: () => string[]) => (call: { tool: string; args: unknown }) => {
    const names = configs();
    const offset = (call.args as { offset?: number }).offset ?? 0;
    const end = Math.min(offset + 2, names.length);
    const structured: AgentRouteList = {
      ...(offset > 0 ? { offset } : {}),
      list_digest: digestOfNames(names),
      routes: names.slice(offset, end).map(route),
      ssh_hosts: [],
      ...(end < names.length ? { more: { not_shown: names.length - end, next_offset: end } } : {}),
    };
    return { isError: false as const, structured, text: 'routes' };
  };
  const offsetsAsked = (): unknown[] =>
    backend.calls.filter((c) => c.tool === 'list_routes').map((c) => (c.args as { offset?: number }).offset ?? 0);

  it('follows more.next_offset to the last page and answers one whole list', async () => {
    const client = await connect();
    backend.respond = pagesOf(() => ['a', 'b', 'c', 'd', 'e']);
    const whole = await client.listRoutes();
    expect(whole).toEqual({
      list_digest: digestOfNames(['a', 'b', 'c', 'd', 'e']),
      routes: ['a', 'b', 'c', 'd', 'e'].map(route),
      ssh_hosts: [],
    });
    expect(offsetsAsked()).toEqual([0, 2, 4]);
    // The first page is asked as list_routes always was, with no offset.
    expect(backend.calls[0]?.args).toEqual({});
  });

  it('starts over when the config was reloaded between two pages, never mixing two configs', async () => {
    const client = await connect();
    let asked = 0;
    backend.respond = pagesOf(() => {
      asked += 1;
      // A route added before the second page is asked: that page would repeat b.
      return asked === 1 ? ['a', 'b', 'c', 'd'] : ['a', 'a2', 'b', 'c', 'd'];
    });
    const whole = await client.listRoutes();
    expect(whole.routes.map((r) => r.name)).toEqual(['a', 'a2', 'b', 'c', 'd']);
    expect(offsetsAsked()).toEqual([0, 2, 0, 2, 4]);
  });

  it('starts over on another list_digest when a reload kept the total and no name repeats (one removed, one added)', async () => {
    const client = await connect();
    let asked = 0;
    backend.respond = pagesOf(() => {
      asked += 1;
      // b removed and e added before the second page: it reads d, e — no repeat, the same total of 4.
      return asked === 1 ? ['a', 'b', 'c', 'd'] : ['a', 'c', 'd', 'e'];
    });
    const whole = await client.listRoutes();
    expect(whole.routes.map((r) => r.name)).toEqual(['a', 'c', 'd', 'e']);
    expect(offsetsAsked()).toEqual([0, 2, 0, 2]);
  });

  it('gives up with ROUTES_CHANGED when the config changes every time it starts over', async () => {
    const client = await connect();
    let asked = 0;
    backend.respond = pagesOf(() => {
      asked += 1;
      return Array.from({ length: 4 + asked }, (_, i) => `r${i}`);
    });
    const error = await client.listRoutes().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PosternConnectionError);
    expect(error).toMatchObject({ code: 'ROUTES_CHANGED' });
    expect(offsetsAsked()).toEqual([0, 2, 0, 2, 0, 2]);
  });

  it('a next_offset that does not follow the page is PROTOCOL, never a loop', async () => {
    const client = await connect();
    backend.respond = () => ({
      isError: false,
      structured: { routes: [], ssh_hosts: [], more: { not_shown: 3, next_offset: 1 } },
      text: 'routes',
    });
    await expect(client.listRoutes()).rejects.toMatchObject({ name: 'PosternConnectionError', code: 'PROTOCOL' });
  });
});

describe('retry', () => {
  const keysSeen = (): unknown[] =>
    backend.calls.map((call) => (call.args as { idempotency_key?: string }).idempotency_key);

  it('never retries without opt-in', async () => {
    backend.respond = failing(throttled);
    const client = await connect();
    await expect(client.httpRequest({ route: 'github', method: 'GET', path: '/' })).rejects.toBeInstanceOf(
      PosternActionError,
    );
    expect(backend.calls).toHaveLength(1);
  });

  it('retries backoff up to attemptsMax when opted in', async () => {
    backend.respond = failing(throttled);
    const client = await connect({ attemptsMax: 3, backoff: true, delayMs: 1 });
    await expect(client.httpRequest({ route: 'github', method: 'GET', path: '/' })).rejects.toMatchObject({
      code: 'REMOTE_THROTTLED',
    });
    expect(backend.calls).toHaveLength(3);
  });

  it('stops retrying as soon as a call succeeds', async () => {
    let answers = 0;
    backend.respond = (call) => {
      answers += 1;
      return answers < 2 ? failing(throttled)() : envelopeAnswer(scriptedEnvelope(`act_ok_${call.tool}`));
    };
    const client = await connect({ attemptsMax: 5, backoff: true, delayMs: 1 });
    expect((await client.httpRequest({ route: 'github', method: 'GET', path: '/' })).invocation_id).toBe(
      'act_ok_http_request',
    );
    expect(backend.calls).toHaveLength(2);
  });

  it('re-sends with the same idempotency key when the broker says same_idempotency_key', async () => {
    backend.respond = failing(unknownSameKey);
    const client = await connect({ attemptsMax: 3, sameIdempotencyKey: true, delayMs: 1 });
    await expect(
      client.httpRequest({ route: 'github', method: 'POST', path: '/', idempotency_key: 'k-1' }),
    ).rejects.toMatchObject({ retry: 'same_idempotency_key' });
    expect(keysSeen()).toEqual(['k-1', 'k-1', 'k-1']);
    // The retries are attempts of the same action (retry_of), not new actions with new tickets.
    const retryOf = backend.calls.map((call) => (call.args as { retry_of?: string }).retry_of);
    expect(retryOf[0]).toBeUndefined();
    expect(retryOf.slice(1).every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
  });

  it('retries an unknown outcome after a backoff as the same action (retry_of), never as a new one', async () => {
    const unknownIdempotent: EnvelopeError = { ...unknownSameKey, retry: 'backoff' };
    let answers = 0;
    backend.respond = (call) => {
      answers += 1;
      return answers < 2
        ? failing(unknownIdempotent, 'act_put_1')()
        : envelopeAnswer(scriptedEnvelope(`act_ok_${call.tool}`));
    };
    const client = await connect({ attemptsMax: 3, backoff: true, delayMs: 1 });
    await client.httpRequest({ route: 'github', method: 'PUT', path: '/x' });
    const retryOf = backend.calls.map((call) => (call.args as { retry_of?: string }).retry_of);
    expect(retryOf).toEqual([undefined, 'act_put_1']);
  });

  it('when the broker refuses that retry (no retry policy on the route), the action’s own unknown answer is thrown', async () => {
    const unknownIdempotent: EnvelopeError = { ...unknownSameKey, retry: 'backoff' };
    let answers = 0;
    backend.respond = () => {
      answers += 1;
      if (answers < 2) return failing(unknownIdempotent, 'act_put_2')();
      return {
        isError: true,
        structured: {
          invocation_id: null,
          error: {
            code: 'UNSUPPORTED_ACTION',
            phase: 'validation',
            outcome: 'not_attempted',
            retry: 'never',
            message: 'route github declares no retry policy',
            field: 'retry_of',
          },
        },
        text: 'refused',
      };
    };
    const client = await connect({ attemptsMax: 3, backoff: true, delayMs: 1 });
    const error = (await client
      .httpRequest({ route: 'github', method: 'PUT', path: '/x' })
      .catch((e: unknown) => e)) as PosternActionError;
    expect(error).toBeInstanceOf(PosternActionError);
    expect(error).toMatchObject({ code: 'REMOTE_OUTCOME_UNKNOWN', invocationId: 'act_put_2' });
    expect(backend.calls).toHaveLength(2);
  });

  it('does not retry same_idempotency_key for a call that carried no key', async () => {
    backend.respond = failing(unknownSameKey);
    const client = await connect({ attemptsMax: 3, sameIdempotencyKey: true, delayMs: 1 });
    await expect(client.httpRequest({ route: 'github', method: 'POST', path: '/' })).rejects.toBeInstanceOf(
      PosternActionError,
    );
    expect(keysSeen()).toEqual([undefined]);
  });

  it('does not retry a disposition the caller did not opt into', async () => {
    backend.respond = failing(unknownSameKey);
    const client = await connect({ attemptsMax: 3, backoff: true, delayMs: 1 });
    await expect(
      client.httpRequest({ route: 'github', method: 'POST', path: '/', idempotency_key: 'k' }),
    ).rejects.toBeInstanceOf(PosternActionError);
    expect(backend.calls).toHaveLength(1);
  });

  it.each([
    ['reconcile', reconcile],
    ['never', never],
  ])('never retries %s, whatever the options', async (_name, error) => {
    backend.respond = failing(error);
    const client = await connect({ attemptsMax: 5, backoff: true, sameIdempotencyKey: true, delayMs: 1 });
    await expect(
      client.httpRequest({ route: 'github', method: 'POST', path: '/', idempotency_key: 'k' }),
    ).rejects.toBeInstanceOf(PosternActionError);
    expect(backend.calls).toHaveLength(1);
  });
});

describe('nextRetry', () => {
  const base = { attempt: 1, retryAfterMs: undefined, hasIdempotencyKey: true };
  it.each([
    ['no options', { ...base, options: undefined, disposition: 'backoff' as const }, { retry: false }],
    [
      'backoff opted in',
      { ...base, options: { attemptsMax: 2, backoff: true, delayMs: 100 }, disposition: 'backoff' as const },
      { retry: true, delayMs: 100 },
    ],
    [
      'backoff, second attempt doubles',
      {
        ...base,
        attempt: 2,
        options: { attemptsMax: 3, backoff: true, delayMs: 100 },
        disposition: 'backoff' as const,
      },
      { retry: true, delayMs: 200 },
    ],
    [
      'retry_after_ms honoured',
      {
        ...base,
        retryAfterMs: 1_500,
        options: { attemptsMax: 2, backoff: true, delayMs: 100 },
        disposition: 'backoff' as const,
      },
      { retry: true, delayMs: 1_500 },
    ],
    [
      'retry_after_ms capped',
      {
        ...base,
        retryAfterMs: 10 ** 9,
        options: { attemptsMax: 2, backoff: true, delayMsMax: 5_000 },
        disposition: 'backoff' as const,
      },
      { retry: true, delayMs: 5_000 },
    ],
    [
      'attempts spent',
      { ...base, attempt: 2, options: { attemptsMax: 2, backoff: true }, disposition: 'backoff' as const },
      { retry: false },
    ],
    [
      'attemptsMax above the ceiling',
      { ...base, attempt: 20, options: { attemptsMax: 1_000, backoff: true }, disposition: 'backoff' as const },
      { retry: false },
    ],
    [
      'same key without a key',
      {
        ...base,
        hasIdempotencyKey: false,
        options: { attemptsMax: 2, sameIdempotencyKey: true },
        disposition: 'same_idempotency_key' as const,
      },
      { retry: false },
    ],
    [
      'fetch_result',
      {
        ...base,
        options: { attemptsMax: 2, backoff: true, sameIdempotencyKey: true },
        disposition: 'fetch_result' as const,
      },
      { retry: false },
    ],
    [
      'after_correction',
      {
        ...base,
        options: { attemptsMax: 2, backoff: true, sameIdempotencyKey: true },
        disposition: 'after_correction' as const,
      },
      { retry: false },
    ],
  ])('%s', (_when, input, expected) => {
    expect(nextRetry(input)).toEqual(expected);
  });
});
