import { describe, expect, it } from 'vitest';
import { checkHttpRequest, type HttpRequestFacts, type HttpRouteFacts } from './check-http-request.js';
import { joinBasePath, normalizeRequestPath } from './normalize-request-path.js';

const limits = { bodyBytesMax: 100, urlBytesMax: 200, headerBytesMax: 300, headersCountMax: 4, idempotencyKeyCharsMax: 64 };
const route: HttpRouteFacts = { methods: ['GET', 'POST'], ownedHeaders: ['x-api-key', 'idempotency-key'], ownedQueryParam: undefined, hasIdempotencyContract: true };
const ok: HttpRequestFacts = { method: 'POST', path: '/documents/7', query: [], headers: [], bodyBytes: 10, idempotencyKey: undefined };

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
    ['an agent-set Authorization', { headers: [['Authorization', 'Bearer x']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.authorization' }],
    ['an agent-set Host', { headers: [['host', 'evil']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.host' }],
    ['an agent-set Cookie', { headers: [['Cookie', 'a=b']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.cookie' }],
    ['an agent-set Proxy-anything', { headers: [['Proxy-Foo', '1']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.proxy-foo' }],
    ['the route’s injected header', { headers: [['X-Api-Key', 'guess']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.x-api-key' }],
    ['the idempotency header set by hand', { headers: [['Idempotency-Key', 'k']] }, { code: 'FORBIDDEN_HEADER', field: 'headers.idempotency-key' }],
    ['a header value with CRLF', { headers: [['x-a', 'a\r\nb: c']] }, { code: 'INVALID_ARGUMENT', field: 'headers.x-a' }],
    ['too many headers', { headers: [['a', '1'], ['b', '1'], ['c', '1'], ['d', '1'], ['e', '1']] }, { code: 'PAYLOAD_LIMIT', field: 'headers' }],
    ['headers too large', { headers: [['a', 'x'.repeat(400)]] }, { code: 'PAYLOAD_LIMIT', field: 'headers' }],
    ['a body over the limit', { bodyBytes: 101 }, { code: 'PAYLOAD_LIMIT', field: 'body' }],
    ['a URL over the limit', { query: [['q', 'x'.repeat(250)]] }, { code: 'PAYLOAD_LIMIT', field: 'path' }],
    ['a GET with a body', { method: 'GET', bodyBytes: 1 }, { code: 'INVALID_ARGUMENT', field: 'body' }],
    ['an idempotency key with a space', { idempotencyKey: 'a b' }, { code: 'INVALID_ARGUMENT', field: 'idempotency_key' }],
    ['a key for a route without a contract', { idempotencyKey: 'k1' }, { code: 'INVALID_ARGUMENT', field: 'idempotency_key' }, { hasIdempotencyContract: false }],
    ['the credential query parameter', { query: [['api_key', 'guess']] }, { code: 'FORBIDDEN_HEADER', field: 'query.api_key' }, { ownedQueryParam: 'api_key' }],
  ];
  it.each(rows)('when %s', (_when, over, expected, routeOver) => {
    const result = checkHttpRequest({ ...ok, ...over }, { ...route, ...routeOver }, limits);
    if (expected === null) expect(result).toEqual({ ok: true, path: '/documents/7' });
    else expect(result).toMatchObject({ ok: false, ...expected });
  });

  it('never echoes a header value in its message', () => {
    const result = checkHttpRequest({ ...ok, headers: [['Authorization', 'Bearer CANARY']] }, route, limits);
    expect(JSON.stringify(result)).not.toContain('CANARY');
  });
});
