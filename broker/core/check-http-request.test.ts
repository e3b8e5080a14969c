import { describe, expect, it } from 'vitest';
import { checkHttpRequest, type HttpRequestFacts, type HttpRouteFacts } from './check-http-request.js';
import { joinBasePath, normalizeRequestPath } from './normalize-request-path.js';

const limits = {
  bodyBytesMax: 100,
  urlBytesMax: 200,
  headerBytesMax: 300,
  headersCountMax: 4,
  idempotencyKeyCharsMax: 64,
};
const route: HttpRouteFacts = {
  methods: ['GET', 'POST'],
  ownedHeaders: ['x-api-key', 'idempotency-key'],
  ownedQueryParam: undefined,
  hasIdempotencyContract: true,
};
const ok: HttpRequestFacts = {
  method: 'POST',
  path: '/documents/7',
  query: [],
  headers: [],
  bodyBytes: 10,
  idempotencyKey: undefined,
};

describe('normalizeRequestPath', () => {
  it.each([
    ['/documents/7', true],
    ['/', true],
    ['/a/b/', true],
    ['/a%20b', true],
    ['/users/a@b.c:1', true],
    ['', false],
    ['documents', false],
    ['https://evil.example/x', false],
    ['//evil.example/x', false],
    ['/a/../b', false],
    ['/a/./b', false],
    ['/..', false],
    ['/a/%2e%2e/b', false],
    ['/a/%2E./b', false],
    ['/a/.%2e', false],
    ['/a%2fb', false],
    ['/a%5Cb', false],
    ['/a\\..\\b', false],
    ['/a//b', false],
    ['/a%zz', false],
    ['/a%00', false],
    ['/a b', false],
    ['/a?x=1', false],
    ['/a#frag', false],
  ])('when the path is %j it is accepted: %s', (path, accepted) => {
    expect(normalizeRequestPath(path).ok).toBe(accepted);
  });

  it('joins a base path without doubling the slash', () => {
    expect(joinBasePath('/v1', '/x')).toBe('/v1/x');
    expect(joinBasePath('/v1/', '/x')).toBe('/v1/x');
    expect(joinBasePath('/', '/x')).toBe('/x');
  });
});

describe('checkHttpRequest', () => {
  type Row = [string, Partial<HttpRequestFacts>, { code: string; field: string } | null, Partial<HttpRouteFacts>?];
  const rows: Row[] = [
    ['a well-formed POST', {}, null],
    ['an unsupported method', { method: 'DELETE' }, { code: 'UNSUPPORTED_ACTION', field: 'method' }],
    ['a path escaping the base', { path: '/a/../../etc' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['an absolute URL', { path: 'http://169.254.169.254/' }, { code: 'INVALID_TARGET', field: 'path' }],
    [
      'an agent-set Authorization',
      { headers: [['Authorization', 'Bearer x']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.authorization' },
    ],
    ['an agent-set Host', { headers: [['host', 'evil']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.host' }],
    ['an agent-set Cookie', { headers: [['Cookie', 'a=b']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.cookie' }],
    [
      'an agent-set Proxy-anything',
      { headers: [['Proxy-Foo', '1']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.proxy-foo' },
    ],
    [
      'the route’s injected header',
      { headers: [['X-Api-Key', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.x-api-key' },
    ],
    [
      'the idempotency header set by hand',
      { headers: [['Idempotency-Key', 'k']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.idempotency-key' },
    ],
    [
      'a header value with CRLF',
      { headers: [['x-a', 'a\r\nb: c']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    [
      'too many headers',
      {
        headers: [
          ['a', '1'],
          ['b', '1'],
          ['c', '1'],
          ['d', '1'],
          ['e', '1'],
        ],
      },
      { code: 'PAYLOAD_LIMIT', field: 'headers' },
    ],
    ['headers too large', { headers: [['a', 'x'.repeat(400)]] }, { code: 'PAYLOAD_LIMIT', field: 'headers' }],
    ['a body over the limit', { bodyBytes: 101 }, { code: 'PAYLOAD_LIMIT', field: 'body' }],
    ['a URL over the limit', { query: [['q', 'x'.repeat(250)]] }, { code: 'PAYLOAD_LIMIT', field: 'path' }],
    ['a GET with a body', { method: 'GET', bodyBytes: 1 }, { code: 'INVALID_ARGUMENT', field: 'body' }],
    [
      'an idempotency key with a space',
      { idempotencyKey: 'a b' },
      { code: 'INVALID_ARGUMENT', field: 'idempotency_key' },
    ],
    [
      'a key for a route without a contract',
      { idempotencyKey: 'k1' },
      { code: 'INVALID_ARGUMENT', field: 'idempotency_key' },
      { hasIdempotencyContract: false },
    ],
    [
      'the credential query parameter',
      { query: [['api_key', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.api_key' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'a header value with a control character',
      { headers: [['x-a', 'a\u0001b']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    ['a header value with DEL', { headers: [['x-a', 'a\u007fb']] }, { code: 'INVALID_ARGUMENT', field: 'headers.x-a' }],
    [
      'a header value with obs-text',
      { headers: [['x-a', 'caf\u00e9']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    [
      'a header value beyond Latin-1',
      { headers: [['x-a', '\u{1f600}']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    [
      'a header value with leading whitespace',
      { headers: [['x-a', ' a']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    [
      'a header value with trailing whitespace',
      { headers: [['x-a', 'a\t']] },
      { code: 'INVALID_ARGUMENT', field: 'headers.x-a' },
    ],
    ['an empty header value', { headers: [['x-a', '']] }, null],
    ['a header value with inner space and tab', { headers: [['x-a', 'a b\tc']] }, null],
    [
      'an agent-set Accept-Encoding',
      { headers: [['accept-encoding', 'gzip']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.accept-encoding' },
    ],
    [
      'an agent-set Accept-Encoding: identity',
      { headers: [['Accept-Encoding', 'identity']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.accept-encoding' },
    ],
    ['an agent-set Range', { headers: [['range', 'bytes=0-7']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.range' }],
    [
      'an agent-set If-Range',
      { headers: [['If-Range', '"etag"']] },
      { code: 'FORBIDDEN_HEADER', field: 'headers.if-range' },
    ],
    [
      'the credential query parameter in upper case',
      { query: [['API_KEY', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.API_KEY' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'the credential query parameter in mixed case',
      { query: [['Api_Key', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.Api_Key' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'a percent-encoded spelling of it',
      { query: [['api%5Fkey', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.api%5Fkey' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'a double-encoded upper-case spelling of it',
      { query: [['API%255FKEY', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.API%255FKEY' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'a spelling PHP reads as it',
      { query: [['api.key', 'guess']] },
      { code: 'FORBIDDEN_HEADER', field: 'query.api.key' },
      { ownedQueryParam: 'api_key' },
    ],
    [
      'another query parameter beside the credential',
      { query: [['api_keys', 'x']] },
      null,
      { ownedQueryParam: 'api_key' },
    ],
    [
      'a query value with a lone surrogate',
      { query: [['q', 'a\ud800']] },
      { code: 'INVALID_ARGUMENT', field: 'query.q' },
    ],
    ['a double-encoded path', { path: '/a/%252e%252e/b' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['an overlong UTF-8 path', { path: '/a/%c0%ae%c0%ae/b' }, { code: 'INVALID_TARGET', field: 'path' }],
  ];
  it.each(rows)('when %s', (_when, over, expected, routeOver) => {
    const result = checkHttpRequest({ ...ok, ...over }, { ...route, ...routeOver }, limits);
    if (expected === null) expect(result).toEqual({ ok: true, path: '/documents/7' });
    else expect(result).toMatchObject({ ok: false, ...expected });
  });

  it('never echoes a header value in its message', () => {
    const result = checkHttpRequest({ ...ok, headers: [['Authorization', 'Bearer CANARY']] }, route, limits);
    expect(JSON.stringify(result)).not.toContain('CANARY');
    for (const value of ['CANARY\u0001', ' CANARY', 'CANARY\u00ff']) {
      const refused = checkHttpRequest({ ...ok, headers: [['x-a', value]] }, route, limits);
      expect(refused.ok).toBe(false);
      expect(JSON.stringify(refused)).not.toContain('CANARY');
    }
  });

  it.each([
    ['accept-encoding', 'content coding'],
    ['range', 'slices'],
    ['if-range', 'slices'],
  ])('says why %s is refused', (name, why) => {
    const result = checkHttpRequest({ ...ok, headers: [[name, 'x']] }, route, limits);
    expect(result).toMatchObject({ ok: false, code: 'FORBIDDEN_HEADER', field: `headers.${name}` });
    if (!result.ok) expect(result.message).toContain(why);
  });
});
