import { describe, expect, it } from 'vitest';
import { credentialRequestInputSchema, hasControlOrBidi } from './agent-api.js';
import { brokerApiSchemas } from './operator-api.js';

const valid = { purpose: 'Read issues for the triage report', for: { host: '*.example.com' } };
const fieldOf = (input: unknown): string | undefined => {
  const parsed = credentialRequestInputSchema.safeParse(input);
  return parsed.success ? undefined : parsed.error.issues[0]?.path.join('.');
};

describe('request_credential arguments', () => {
  it('take a purpose and what the credential is for, with bounded hints', () => {
    expect(fieldOf(valid)).toBeUndefined();
    expect(fieldOf({ ...valid, for: { route: 'docs' }, kind: 'header', header: 'X-Api-Key', scopes: ['repo'] })).toBe(
      undefined,
    );
    expect(fieldOf({ ...valid, purpose: 'two lines\n\tindented' })).toBeUndefined();
  });

  it.each([
    ['no purpose', { for: valid.for }, 'purpose'],
    ['no for', { purpose: 'x' }, 'for'],
    ['a purpose over 500 characters', { ...valid, purpose: 'p'.repeat(501) }, 'purpose'],
    ['a right-to-left override in the purpose', { ...valid, purpose: 'pay \u202Egnp.exe' }, 'purpose'],
    ['an isolate in a scope', { ...valid, scopes: ['read\u2066'] }, 'scopes.0'],
    ['an escape sequence in the format', { ...valid, format: 'ghp_\u001b[31m' }, 'format'],
    ['a line break in the format', { ...valid, format: 'a\nb' }, 'format'],
    ['a C1 control in the purpose', { ...valid, purpose: 'x\u0085y' }, 'purpose'],
    ['an http docs_url', { ...valid, docs_url: 'http://example.com/tokens' }, 'docs_url'],
    ['a javascript: docs_url', { ...valid, docs_url: 'javascript:alert(1)' }, 'docs_url'],
    ['a non-ASCII docs_url host', { ...valid, docs_url: 'https://exаmple.com/' }, 'docs_url'],
    ['a host with a path', { ...valid, for: { host: 'example.com/x' } }, 'for.host'],
    ['a header that is no token', { ...valid, header: 'X Api' }, 'header'],
    ['21 scopes', { ...valid, scopes: Array.from({ length: 21 }, (_, i) => `s${i}`) }, 'scopes'],
    ['an undocumented field', { ...valid, value: 'secret' }, ''],
    ['a malformed request_id', { request_id: 'act_123456' }, 'request_id'],
  ])('refuse %s, naming the field', (_what, input, field) => {
    expect(fieldOf(input)).toBe(field);
  });

  it('need only request_id to wait again', () => {
    expect(fieldOf({ request_id: 'crq_0123456789', timeout_ms: 1000 })).toBeUndefined();
  });

  it('detect every control and bidi formatting character, and only line feed and tab pass where lines are allowed', () => {
    for (const code of [0x00, 0x07, 0x0d, 0x1f, 0x7f, 0x9f, 0x061c, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069])
      expect(hasControlOrBidi(`a${String.fromCharCode(code)}b`, { lines: true }), code.toString(16)).toBe(true);
    expect(hasControlOrBidi('a\nb\tc', { lines: true })).toBe(false);
    expect(hasControlOrBidi('a\nb')).toBe(true);
    expect(hasControlOrBidi('ünïcode – fine ✓')).toBe(false);
  });
});

describe('credential_requests.provision input', () => {
  const schema = brokerApiSchemas['credential_requests.provision'].input;
  it('takes a new credential (as credentials.add) or an existing one by name', () => {
    const request_id = 'crq_0123456789';
    const credential = { name: 'docs-token', kind: 'bearer', secret: 's', bindings: ['docs'] };
    expect(schema.safeParse({ request_id, credential }).success).toBe(true);
    expect(schema.safeParse({ request_id, existing: 'docs-token', add_binding: 'api.example.com' }).success).toBe(true);
    expect(schema.safeParse({ request_id, existing: 'docs-token', credential }).success).toBe(false);
    expect(schema.safeParse({ request_id: 'act_0123456789', existing: 'docs-token' }).success).toBe(false);
  });
});
