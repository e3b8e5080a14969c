import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isCodedError, type ActionState } from '../contract/index.js';
import { parseConfig } from '../config/index.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { abandonBlockedHeads } from '../testing/queue-waits.js';
import { HistoryEchoRemote } from '../testing/history-echo-remote.js';

/** The client secret and every token issued carry a canary of their own: neither may appear anywhere it is searched. */
const clientCanary = 'CLIENTCANARY-4b1e77d0-secret';
const tokenCanary = 'TOKENCANARY-93aa01f2';
const clientId = 'client one';
const clientSecret = `s3cr:t ${clientCanary}`;

interface TokenFetch {
  readonly authorization: string | undefined;
  readonly contentType: string | undefined;
  readonly body: string;
}

/** A token endpoint on loopback: counts fetches, issues tokens holding the canary, or refuses the client. */
interface TokenServer {
  readonly port: number;
  readonly fetches: TokenFetch[];
  mode: 'issue' | 'refuse' | 'no_token' | 'busy';
  expiresIn: number;
  issued: string[];
  close(): Promise<void>;
}

/** The API behind the route: records each Authorization it sees, answers `status` and echoes the header back. */
interface ApiServer {
  readonly port: number;
  readonly seen: string[];
  status: number;
  close(): Promise<void>;
}

let h: HttpActionHarness;
const servers: Server[] = [];

beforeAll(async () => {
  h = await openHttpActionHarness();
  const secret = Buffer.from(`${clientId}:${clientSecret}`);
  await h.vault.add({ name: 'oauth-client', kind: 'oauth2_client', secret, bindings: ['127.0.0.1'] });
});
afterEach(async () => {
  await abandonBlockedHeads(h.queue);
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});
afterAll(async () => {
  await h.dispose();
});

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function tokenServer(): Promise<TokenServer> {
  const state = {
    fetches: [] as TokenFetch[],
    mode: 'issue' as TokenServer['mode'],
    expiresIn: 3600,
    issued: [] as string[],
  };
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      state.fetches.push({ authorization: req.headers.authorization, contentType: req.headers['content-type'], body });
      res.setHeader('content-type', 'application/json');
      if (state.mode === 'busy') {
        res.statusCode = 503;
        res.setHeader('retry-after', '1');
        res.end('{"error":"temporarily_unavailable"}');
        return;
      }
      if (state.mode === 'refuse') {
        res.statusCode = 401;
        res.end(JSON.stringify({ error: 'invalid_client', error_description: 'unknown client' }));
        return;
      }
      const token = `tok-${state.fetches.length}-${tokenCanary}`;
      state.issued.push(token);
      const answer =
        state.mode === 'no_token' ? { token_type: 'Bearer' } : { access_token: token, token_type: 'Bearer' };
      res.end(JSON.stringify({ ...answer, expires_in: state.expiresIn }));
    });
  });
  const port = await listen(server);
  return Object.assign(state, { port, close: () => new Promise<void>((r) => server.close(() => r())) });
}

async function apiServer(): Promise<ApiServer> {
  const state = { seen: [] as string[], status: 200 };
  const server = createServer((req, res) => {
    void readBody(req).then(() => {
      state.seen.push(req.headers.authorization ?? '');
      res.statusCode = state.status;
      res.setHeader('content-type', 'application/json');
      // An API that reflects what it was sent: the token must come back scrubbed.
      res.end(JSON.stringify({ you_sent: req.headers.authorization ?? null }));
    });
  });
  const port = await listen(server);
  return Object.assign(state, { port, close: () => new Promise<void>((r) => server.close(() => r())) });
}

function oauthConfig(apiPort: number, tokenUrl: string, credential = 'oauth-client') {
  const extra = [
    '    oauth2:',
    `      token_url: ${tokenUrl}`,
    '      scopes: [read, "write:all"]',
    '      audience: https://api.example',
  ];
  return localRouteConfig(apiPort, extra.join('\n'), { credential, injection: 'oauth2_client_credentials' });
}

async function setup(): Promise<{ api: ApiServer; tokens: TokenServer; config: ReturnType<typeof oauthConfig> }> {
  const [api, tokens] = await Promise.all([apiServer(), tokenServer()]);
  // Each case gets a route name of its own token cache key: a route's name is part of it.
  return { api, tokens, config: oauthConfig(api.port, `http://127.0.0.1:${tokens.port}/oauth/token`) };
}

/** The token actions recorded since `fromSeq`: the broker's own actions whose target names the route's token. */
function tokenActions(fromSeq: number): ActionState[] {
  const ids = [...h.temp.journal.events()]
    .filter((e) => e.seq > fromSeq && e.kind === 'ACTION_ACCEPTED' && e.payload.target === 'token:docs')
    .map((e) => e.action_id);
  return ids.map((id) => h.temp.journal.getAction(id)).filter((s): s is ActionState => s !== undefined);
}

function lastSeq(): number {
  return [...h.temp.journal.events()].at(-1)?.seq ?? 0;
}

function get(path = '/things') {
  return { route: 'docs', method: 'GET', path };
}

describe('when a route injects an OAuth2 client-credentials token', () => {
  it('fetches a token as its own recorded action first, sends it as Bearer, then reuses it from the sealed cache', async () => {
    const { api, tokens, config } = await setup();
    const from = lastSeq();
    const first = await h.run(config, get());
    expect(first.envelope.error).toBeUndefined();
    expect(first.response?.status).toBe(200);
    expect(tokens.fetches).toHaveLength(1);
    const fetch = tokens.fetches[0];
    // RFC 6749 §2.3.1: id and secret form-encoded, then HTTP basic; §4.4.2: the grant, scopes and audience.
    const pair = Buffer.from(fetch?.authorization?.replace(/^Basic /, '') ?? '', 'base64').toString('utf8');
    expect(pair).toBe(`client+one:s3cr%3At+${clientCanary}`);
    expect(fetch?.contentType).toBe('application/x-www-form-urlencoded');
    expect(new URLSearchParams(fetch?.body)).toEqual(
      new URLSearchParams({
        grant_type: 'client_credentials',
        scope: 'read write:all',
        audience: 'https://api.example',
      }),
    );
    expect(api.seen).toEqual([`Bearer ${tokens.issued[0]}`]);

    const [token] = tokenActions(from);
    expect(token).toMatchObject({ approval: 'none', lane: null, session_id: null, outcome: 'committed' });
    const kinds = h.events(token?.action_id ?? '').map((e) => e.kind);
    expect(kinds).toEqual(expect.arrayContaining(['CREDENTIAL_AUTHORIZED', 'DISPATCH_STARTED', 'RESULT_COMMITTED']));
    // The token action's kept answer is scrubbed of the token it carried; the agent's answer of the echoed token.
    const kept = h.results.readForAction(token?.action_id ?? '');
    expect(kept?.body.toString('utf8')).toContain('"access_token":"[REDACTED]"');
    expect(first.response?.body.toString('utf8')).toContain('[REDACTED]');
    expect(first.response?.body.toString('utf8')).not.toContain(tokenCanary);
    const authorized = h.events(first.envelope.invocation_id).find((e) => e.kind === 'CREDENTIAL_AUTHORIZED');
    expect(authorized?.payload).toMatchObject({ injection_mode: 'oauth2_client_credentials' });

    const second = await h.run(config, get('/more'));
    expect(second.envelope.error).toBeUndefined();
    expect(tokens.fetches).toHaveLength(1);
    expect(tokenActions(from)).toHaveLength(1);
    expect(api.seen).toEqual([`Bearer ${tokens.issued[0]}`, `Bearer ${tokens.issued[0]}`]);
  });

  it('fetches a new token once the cached one is within 60 s of its expiry', async () => {
    const { api, tokens, config } = await setup();
    tokens.expiresIn = 180;
    await h.run(config, get());
    h.temp.clock.advance(119_000);
    await h.run(config, get());
    expect(tokens.fetches).toHaveLength(1);
    h.temp.clock.advance(2_000);
    await h.run(config, get());
    expect(tokens.fetches).toHaveLength(2);
    expect(api.seen.at(-1)).toBe(`Bearer ${tokens.issued[1]}`);
  });

  it('shares one fetch between requests that need the token at the same time', async () => {
    const { api, tokens, config } = await setup();
    const answers = await Promise.all([h.run(config, get('/a')), h.run(config, get('/b')), h.run(config, get('/c'))]);
    for (const a of answers) expect(a.envelope.error).toBeUndefined();
    expect(tokens.fetches).toHaveLength(1);
    expect(api.seen).toHaveLength(3);
  });

  it('records the request not_attempted (OAUTH_TOKEN_UNAVAILABLE) when the token endpoint refuses the client', async () => {
    const { api, tokens, config } = await setup();
    tokens.mode = 'refuse';
    const from = lastSeq();
    const { envelope } = await h.run(config, get());
    expect(envelope.error).toMatchObject({ code: 'OAUTH_TOKEN_UNAVAILABLE', outcome: 'not_attempted' });
    const state = h.temp.journal.getAction(envelope.invocation_id);
    expect(state).toMatchObject({ outcome: 'not_attempted', phase: 'credential_injection', retry: 'after_correction' });
    expect(state?.dispatch_seq).toBeNull();
    expect(api.seen).toEqual([]);
    // The token action says why: the endpoint's own answer, kept scrubbed.
    const [token] = tokenActions(from);
    expect(token).toMatchObject({ outcome: 'rejected' });
    expect(envelope.error?.message).toContain(token?.action_id);
    expect(h.results.readForAction(token?.action_id ?? '')?.body.toString('utf8')).toContain('invalid_client');
  });

  it('records it not_attempted, retry backoff, when the token endpoint asks to wait', async () => {
    const { api, tokens, config } = await setup();
    tokens.mode = 'busy';
    const { envelope } = await h.run(config, get());
    expect(envelope.error).toMatchObject({
      code: 'OAUTH_TOKEN_UNAVAILABLE',
      outcome: 'not_attempted',
      retry: 'backoff',
    });
    expect(api.seen).toEqual([]);
  });

  it('records it not_attempted when the token endpoint cannot be reached', async () => {
    const { api, tokens } = await setup();
    await tokens.close();
    const config = oauthConfig(api.port, `http://127.0.0.1:${tokens.port}/oauth/token`);
    const from = lastSeq();
    const { envelope } = await h.run(config, get());
    expect(envelope.error).toMatchObject({ code: 'OAUTH_TOKEN_UNAVAILABLE', outcome: 'not_attempted' });
    expect(tokenActions(from)[0]).toMatchObject({ outcome: 'not_attempted', code: 'CONNECT_REFUSED' });
    expect(api.seen).toEqual([]);
  });

  it('refuses an answer without an access token, and fetches again for the next request', async () => {
    const { api, tokens, config } = await setup();
    tokens.mode = 'no_token';
    const { envelope } = await h.run(config, get());
    expect(envelope.error).toMatchObject({ code: 'OAUTH_TOKEN_UNAVAILABLE', retry: 'after_correction' });
    tokens.mode = 'issue';
    const next = await h.run(config, get());
    expect(next.envelope.error).toBeUndefined();
    expect(tokens.fetches).toHaveLength(2);
    expect(api.seen).toHaveLength(1);
  });

  it('records a 401 on a freshly fetched token as the remote answer and never resends the request', async () => {
    const { api, tokens, config } = await setup();
    api.status = 401;
    const { envelope } = await h.run(config, get());
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({ outcome: 'rejected' });
    expect(h.temp.journal.getAction(envelope.invocation_id)?.attempts).toHaveLength(1);
    expect(api.seen).toEqual([`Bearer ${tokens.issued[0]}`]);
    expect(tokens.fetches).toHaveLength(1);
  });

  it('drops a cached token the remote answered 401: that request is not resent, the next one fetches', async () => {
    const { api, tokens, config } = await setup();
    await h.run(config, get());
    api.status = 401;
    const refused = await h.run(config, get());
    expect(h.temp.journal.getAction(refused.envelope.invocation_id)).toMatchObject({ outcome: 'rejected' });
    expect(tokens.fetches).toHaveLength(1);
    expect(api.seen).toHaveLength(2);
    api.status = 200;
    const next = await h.run(config, get());
    expect(next.envelope.error).toBeUndefined();
    expect(tokens.fetches).toHaveLength(2);
    expect(api.seen).toEqual([
      `Bearer ${tokens.issued[0]}`,
      `Bearer ${tokens.issued[0]}`,
      `Bearer ${tokens.issued[1]}`,
    ]);
  });

  it('a remote that echoes earlier requests hands back neither the token it refused (dropped) nor the new one', async () => {
    const [api, tokens] = await Promise.all([HistoryEchoRemote.start(), tokenServer()]);
    try {
      const config = oauthConfig(api.port, `http://127.0.0.1:${tokens.port}/oauth/token`);
      await h.run(config, get());
      api.status = 401;
      await h.run(config, get());
      api.status = 200;
      const { envelope, response } = await h.run(config, get());
      // The attack happened: T1 was dropped after the 401, T2 fetched, and the answer carries both.
      expect(tokens.issued).toHaveLength(2);
      const [t1, t2] = tokens.issued as [string, string];
      expect(api.seen).toEqual([`Bearer ${t1}`, `Bearer ${t1}`, `Bearer ${t2}`]);
      expect(envelope.error).toBeUndefined();
      expect(response?.redacted).toBe(true);
      const body = response?.body.toString() ?? '';
      const answered = [body, Buffer.from(body, 'base64').toString('latin1')];
      const b64 = /"history_b64":"([^"]*)"/.exec(body)?.[1];
      if (b64 !== undefined) answered.push(Buffer.from(b64, 'base64').toString('latin1'));
      for (const token of [t1, t2])
        for (const form of [token, Buffer.from(token).toString('base64'), tokenCanary])
          expect(answered.filter((text) => text.includes(form))).toEqual([]);
    } finally {
      await api.close();
    }
  });

  it('never sends the client to a token endpoint its credential is not bound to', async () => {
    const { api, tokens } = await setup();
    const config = oauthConfig(api.port, `http://localhost:${tokens.port}/oauth/token`);
    const { envelope } = await h.run(config, get());
    expect(envelope.error).toMatchObject({ code: 'CREDENTIAL_MISSING', outcome: 'not_attempted' });
    expect(tokens.fetches).toEqual([]);
    expect(api.seen).toEqual([]);
  });

  it('leaves neither the client secret nor any token in the journal, results, log or answers', async () => {
    const { tokens, config } = await setup();
    await h.run(config, get());
    expect(tokens.issued.length).toBeGreaterThan(0);
    const searched: string[] = [];
    const leaks: string[] = [];
    const needles = [clientCanary, tokenCanary, encodeURIComponent(clientCanary)].map((n) => Buffer.from(n));
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) {
          if (name !== 'vault') walk(path);
          continue;
        }
        searched.push(path);
        const bytes = readFileSync(path);
        if (needles.some((n) => bytes.includes(n))) leaks.push(path);
      }
    };
    walk(h.temp.dir.path);
    const text = JSON.stringify(h.envelopes) + h.logLines.join('\n');
    for (const n of [clientCanary, tokenCanary]) if (text.includes(n)) leaks.push(`answers or log: ${n}`);
    expect(searched.some((p) => p.endsWith('.sqlite'))).toBe(true);
    expect(h.logLines.some((l) => l.includes('oauth2 token action recorded'))).toBe(true);
    expect(leaks).toEqual([]);
  });
});

describe('when the configuration declares an oauth2 route', () => {
  const route = (injection: string, oauth2: string) =>
    [
      'version: 1',
      'routes:',
      '  - name: api',
      '    base_url: https://api.example',
      '    credential: c',
      `    injection: ${injection}`,
      oauth2,
    ].join('\n') + '\n';

  it.each([
    ['oauth2_client_credentials', '', 'needs oauth2'],
    [
      'bearer',
      '    oauth2: { token_url: https://auth.example/token }',
      'only applies to injection oauth2_client_credentials',
    ],
    ['oauth2_client_credentials', '    oauth2: { token_url: http://auth.example/token }', 'http:// only for 127.0.0.1'],
    [
      'oauth2_client_credentials',
      '    oauth2: { token_url: "https://auth.example/token?client_secret=x" }',
      'no query',
    ],
    ['oauth2_client_credentials', '    oauth2: { token_url: https://auth.example/t, scopes: ["a b"] }', 'OAuth2 scope'],
  ])('refuses injection %s with %j (%s)', (injection, oauth2, message) => {
    let error: unknown;
    try {
      parseConfig(route(injection, oauth2));
    } catch (e) {
      error = e;
    }
    expect(isCodedError(error) && error.code).toBe('CONFIG_INVALID');
    expect(String((error as Error).message)).toContain(message);
  });

  it('accepts https, or http to loopback', () => {
    for (const url of ['https://auth.example/oauth/token', 'http://127.0.0.1:8080/token', 'http://localhost/token']) {
      const config = parseConfig(
        route('oauth2_client_credentials', `    oauth2: { token_url: "${url}", scopes: [a] }`),
      );
      expect(config.routes.get('api')?.oauth2?.token_url).toBe(url);
    }
  });
});

describe('when an oauth2_client credential is added', () => {
  it.each([['no-colon-here'], [':secret-without-id'], ['id:short']])(
    'refuses %j naming the secret field',
    async (s) => {
      let error: unknown;
      try {
        await h.vault.add({
          name: 'bad-client',
          kind: 'oauth2_client',
          secret: Buffer.from(s),
          bindings: ['127.0.0.1'],
        });
      } catch (e) {
        error = e;
      }
      expect(isCodedError(error) && { code: error.code, field: error.field }).toEqual({
        code: 'INVALID_ARGUMENT',
        field: 'secret',
      });
    },
  );
});
