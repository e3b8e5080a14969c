import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { checkHttpRequest, type HttpRequestFacts, type HttpRouteFacts } from './check-http-request.js';
import { checkWireRequest, isFieldValue } from './check-wire-request.js';

// undici's own request validation (lib/core/request.js: path, method, processHeader), the code
// `dispatch()` runs after DISPATCH_STARTED. The package has no "exports" map, so the module is
// loaded as undici loads it: no copy of its regexes here.
type UndiciRequest = new (
  origin: string,
  opts: { path: string; method: string; headers: string[] },
  handler: object,
) => unknown;
const UndiciRequestClass = createRequire(import.meta.url)('undici/lib/core/request.js') as UndiciRequest;
const handler = { onRequestStart: () => undefined };

function undiciRefuses(method: string, path: string, headers: string[]): boolean {
  try {
    new UndiciRequestClass('http://127.0.0.1:1', { path, method, headers }, handler);
    return false;
  } catch (error) {
    // Only its validation error counts; anything else means the probe itself is wrong.
    expect((error as { code?: string }).code).toBe('UND_ERR_INVALID_ARG');
    return true;
  }
}

const hex = (value: string): string =>
  [...value].map((c) => `U+${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`).join(' ');
/** Every Latin-1 char (each control, DEL, 0x80, 0xFF…) inside a value, plus what is beyond Latin-1. */
const everyChar = [
  ...Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)),
  '\u0100',
  '\u2028',
  '😀',
  '\ud800',
  '\udfff',
];
const headerValues: string[] = [
  ...everyChar.map((c) => `a${c}b`),
  ...everyChar.map((c) => `${c}`),
  ' leading',
  'trailing ',
  '\tleading-tab',
  'trailing-tab\t',
  'a\r\nx-injected: 1',
  'Bearer CANARY\n',
];

describe('checkWireRequest against undici 7 itself', () => {
  it.each(headerValues.map((v) => [hex(v), v]))(
    'when a header value is %s, ours refuses whatever undici refuses',
    (_label, value) => {
      const refusedByUndici = undiciRefuses('GET', '/x', ['x-probe', value]);
      const wire = checkWireRequest('GET', '/x', [['x-probe', value]]);
      if (refusedByUndici) expect(wire.ok).toBe(false);
      // Ours is stricter: only HTAB, SP and VCHAR, with visible characters at both ends.
      expect(wire.ok).toBe(/^(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?$/.test(value));
    },
  );

  it('the table covers what undici refuses and what it lets through (ours refuses more)', () => {
    const undiciRefused = headerValues.filter((v) => undiciRefuses('GET', '/x', ['x-probe', v]));
    const oursRefused = headerValues.filter((v) => !isFieldValue(v));
    expect(undiciRefused.length).toBeGreaterThan(30);
    expect(oursRefused.length).toBeGreaterThan(undiciRefused.length);
    expect(undiciRefused.filter((v) => isFieldValue(v))).toEqual([]);
    // The path probe below is not vacuous either.
    expect(undiciRefuses('GET', '/a\u0001b', [])).toBe(true);
    expect(undiciRefuses('GET', '/a b', [])).toBe(true);
    expect(undiciRefuses('GET', '/a\u0100b', [])).toBe(true);
  });

  it.each(everyChar.map((c) => [hex(c), c]))(
    'when the path holds %s, ours refuses whatever undici refuses',
    (_label, c) => {
      const path = `/a${c}b?k=v`;
      if (undiciRefuses('GET', path, [])) expect(checkWireRequest('GET', path, []).ok).toBe(false);
    },
  );

  it.each(['GE T', 'GET\n', 'G\u0100T', '', 'GET/1'])(
    'when the method is %j, ours refuses whatever undici refuses',
    (method) => {
      if (undiciRefuses(method, '/x', [])) expect(checkWireRequest(method, '/x', []).ok).toBe(false);
      expect(checkWireRequest(method, '/x', [])).toMatchObject({ ok: false, field: 'method' });
    },
  );

  it.each(['host', 'Content-Length', 'transfer-encoding', 'keep-alive', 'upgrade', 'connection', 'expect'])(
    'when a route would put %s on the wire, it is refused before undici interprets it',
    (name) => {
      expect(checkWireRequest('POST', '/x', [[name, '1']])).toMatchObject({
        ok: false,
        field: `headers.${name.toLowerCase()}`,
      });
    },
  );

  it.each([
    ['a path not in origin form', 'GET', 'http://evil.example/x', 'path'],
    ['a //host path', 'GET', '//evil.example/x', 'path'],
    ['a fragment', 'GET', '/x#y', 'path'],
    ['a space in the query', 'GET', '/x?a=b c', 'path'],
    ['a header name that is no token', 'GET', '/x', 'headers'],
  ])('when the request has %s it is refused on %s', (_when, method, path, field) => {
    const headers: Array<[string, string]> = field === 'headers' ? [['x probe', 'v']] : [];
    expect(checkWireRequest(method, path, headers)).toMatchObject({ ok: false, field });
  });

  it('a well-formed request passes, with the credential injected', () => {
    const headers: Array<[string, string]> = [
      ['authorization', 'Bearer CANARY'],
      ['x-empty', ''],
    ];
    expect(checkWireRequest('POST', '/api/documents/7?q=a%20b&api_key=CANARY', headers)).toEqual({ ok: true });
  });

  it('never repeats the value it refused (it may be the secret)', () => {
    const answers = [
      checkWireRequest('GET', '/x', [['authorization', 'Bearer CANARY\u0001']]),
      checkWireRequest('GET', '/x?api_key=CANARY\u0001', []),
      checkWireRequest('GET', '/x', [['x-api-key', 'CANARY\u0100']]),
    ];
    for (const answer of answers) expect(answer.ok).toBe(false);
    expect(JSON.stringify(answers)).not.toContain('CANARY');
  });
});

describe('checkHttpRequest refuses at validation whatever the wire check would refuse later', () => {
  const limits = {
    bodyBytesMax: 100,
    urlBytesMax: 2000,
    headerBytesMax: 3000,
    headersCountMax: 8,
    idempotencyKeyCharsMax: 64,
  };
  const route: HttpRouteFacts = {
    methods: ['GET'],
    ownedHeaders: [],
    ownedQueryParam: undefined,
    hasIdempotencyContract: false,
  };
  const ok: HttpRequestFacts = {
    method: 'GET',
    path: '/x',
    query: [],
    headers: [],
    bodyBytes: 0,
    idempotencyKey: undefined,
  };

  it.each(headerValues.map((v) => [hex(v), v]))('when an agent header value is %s', (_label, value) => {
    const result = checkHttpRequest({ ...ok, headers: [['x-probe', value]] }, route, limits);
    if (!checkWireRequest('GET', '/x', [['x-probe', value]]).ok) {
      expect(result).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT', field: 'headers.x-probe' });
    } else {
      expect(result.ok).toBe(true);
    }
  });

  it('the refusal never repeats the value', () => {
    const result = checkHttpRequest({ ...ok, headers: [['x-probe', 'CANARY\u0001']] }, route, limits);
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).not.toContain('CANARY');
  });
});
