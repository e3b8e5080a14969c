import { describe, expect, it } from 'vitest';
import type { CredentialSummary } from '../../../broker/contract/index.js';
import { credentialsReducer, initialCredentialsView, parseBindings } from './credentials-reducer.js';

const credential = (name: string): CredentialSummary => ({
  id: `cred_${name}`,
  name,
  kind: 'bearer',
  version_tag: 'v1-00000000',
  bindings: ['api.example.com'],
});

describe('the credentials reducer', () => {
  it('when the list arrives, credentials are sorted by name and the vault state is kept', () => {
    const view = credentialsReducer(initialCredentialsView, {
      type: 'received',
      reply: { ok: true, value: { state: 'unlocked', credentials: [credential('b'), credential('a')] } },
    });
    expect(view.credentials.map((c) => c.name)).toEqual(['a', 'b']);
    expect(view).toMatchObject({ phase: 'ready', vaultState: 'unlocked', replies: 1 });
  });

  it('when an add runs and succeeds, it records the name and version only', () => {
    const started = credentialsReducer(
      { ...initialCredentialsView, added: { ok: false, error: { code: 'X', message: 'old' } } },
      { type: 'add_started', name: 'docs' },
    );
    expect(started).toMatchObject({ adding: 'docs', added: null });
    const done = credentialsReducer(started, {
      type: 'add_finished',
      reply: { ok: true, value: { ...credential('docs'), version_tag: 'v1-abcdef01' } },
    });
    expect(done).toMatchObject({ adding: null, added: { ok: true, name: 'docs', version_tag: 'v1-abcdef01' } });
  });

  it('when an add is refused, the refusal (code, field) is shown', () => {
    const done = credentialsReducer(credentialsReducer(initialCredentialsView, { type: 'add_started', name: 'docs' }), {
      type: 'add_finished',
      reply: { ok: false, error: { code: 'VAULT_LOCKED', message: 'the vault is locked' } },
    });
    expect(done.added).toEqual({ ok: false, error: { code: 'VAULT_LOCKED', message: 'the vault is locked' } });
  });

  it('a removal asks first; Keep dismisses; the second click removes and says how it went', () => {
    const asked = credentialsReducer(initialCredentialsView, { type: 'remove_asked', name: 'docs' });
    expect(asked.confirming).toBe('docs');
    expect(credentialsReducer(asked, { type: 'remove_dismissed' }).confirming).toBeNull();
    const removing = credentialsReducer(asked, { type: 'remove_started', name: 'docs' });
    expect(removing).toMatchObject({ confirming: null, removing: 'docs' });
    expect(
      credentialsReducer(removing, { type: 'remove_finished', name: 'docs', reply: { ok: true, value: {} } }),
    ).toMatchObject({ removing: null, removed: { ok: true, name: 'docs' } });
  });

  it.each([
    ['api.example.com, docs', ['api.example.com', 'docs']],
    ['  a  b,,c ', ['a', 'b', 'c']],
    ['', []],
  ])('bindings typed as %j are %j', (text, bindings) => {
    expect(parseBindings(text)).toEqual(bindings);
  });
});
