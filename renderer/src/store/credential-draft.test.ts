import { describe, expect, it } from 'vitest';
import {
  awsSigV4Secret,
  credentialInput,
  emptyCredentialDraft,
  formCredentialKind,
  type CredentialDraft,
} from './credential-draft.js';

const draft = (overrides: Partial<CredentialDraft> = {}): CredentialDraft => ({
  ...emptyCredentialDraft,
  name: ' tok ',
  bindings: 'docs, 127.0.0.1  api.example.com',
  header: ' X-Key ',
  template: ' Token {secret} ',
  param: ' key ',
  ...overrides,
});

describe('a credential draft', () => {
  it.each([
    ['bearer', {}],
    ['basic', {}],
    ['header', { header: 'X-Key', template: 'Token {secret}' }],
    ['query', { param: 'key' }],
    ['aws_sigv4', {}],
    ['oauth2_client', {}],
  ] as const)('when the kind is %s, the input carries only the options that kind takes', (kind, options) => {
    expect(credentialInput(draft({ kind }), 's3cret')).toEqual({
      name: 'tok',
      kind,
      secret: 's3cret',
      bindings: ['docs', '127.0.0.1', 'api.example.com'],
      ...options,
    });
  });

  it('when a header template is left empty, the broker default is asked for (no template sent)', () => {
    expect(credentialInput(draft({ kind: 'header', template: '  ' }), 's')).not.toHaveProperty('template');
  });

  it('when the kind is aws_sigv4, the secret is id:key, with :token only when one was typed', () => {
    expect(awsSigV4Secret(' AKIAEXAMPLE0000001 ', 'k/ey+1', '  ')).toBe('AKIAEXAMPLE0000001:k/ey+1');
    expect(awsSigV4Secret('AKIAEXAMPLE0000001', 'k/ey+1', ' tok== ')).toBe('AKIAEXAMPLE0000001:k/ey+1:tok==');
    expect(formCredentialKind('aws_sigv4')).toBe('aws_sigv4');
  });

  it('when a kind is one no form adds, it is not a form kind', () => {
    expect(formCredentialKind('header')).toBe('header');
    expect(formCredentialKind('ssh_key')).toBeNull();
    expect(formCredentialKind(null)).toBeNull();
  });
});
