import { describe, expect, it } from 'vitest';
import { httpActionRequestSchema, normalizeHttpRequest, requestFingerprint } from './http-action-request.js';
import { scrubBytes, secretForms } from './secret-scrubber.js';

const base = {
  route: 'docs',
  method: 'post',
  path: '/documents/7',
  headers: { 'X-B': '2', 'x-a': '1' },
  query: { q: ['1', '2'] },
  body: '{"a":1}',
};
const fp = (over: Record<string, unknown> = {}, parts?: Parameters<typeof requestFingerprint>[1]) =>
  requestFingerprint(normalizeHttpRequest(httpActionRequestSchema.parse({ ...base, ...over })), parts);

describe('the request fingerprint', () => {
  it('is stable across header name case and header order, and upper-cases the method', () => {
    expect(fp()).toBe(fp({ headers: { 'x-a': '1', 'x-b': '2' }, method: 'POST' }));
    expect(fp()).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it.each([
    ['the body', { body: '{"a":2}' }],
    ['the path', { path: '/documents/8' }],
    ['the query order', { query: { q: ['2', '1'] } }],
    ['a header value', { headers: { 'x-a': '9', 'x-b': '2' } }],
    ['the method', { method: 'PUT' }],
    ['the route', { route: 'other' }],
  ])('changes when %s changes', (_what, over) => {
    expect(fp(over)).not.toBe(fp());
  });

  it('an idempotency fingerprint covers only the parts the contract names', () => {
    expect(fp({ headers: { 'x-other': '1' } }, ['method', 'path', 'body'])).toBe(fp({}, ['method', 'path', 'body']));
    expect(fp({ body: 'changed' }, ['method', 'path', 'body'])).not.toBe(fp({}, ['method', 'path', 'body']));
  });
});

describe('the secret scrubber', () => {
  it('replaces every form of the secret and says so', () => {
    const forms = secretForms({ kind: 'basic', user: 'u', password: 'hunter22' });
    const basic = Buffer.from('u:hunter22').toString('base64');
    const out = scrubBytes(Buffer.from(`a hunter22 b ${basic} c hunter22`), forms);
    expect(out).toEqual({ bytes: Buffer.from('a [REDACTED] b [REDACTED] c [REDACTED]'), redacted: true });
    expect(scrubBytes(Buffer.from('clean'), forms)).toEqual({ bytes: Buffer.from('clean'), redacted: false });
  });
});
