import { describe, expect, it } from 'vitest';
import {
  appliesWords,
  configReducer,
  configTrustBanner,
  fileChanges,
  initialConfigView,
  parseMethods,
  routesHeadingWords,
  sentence,
  type PendingConfig,
  type ShownConfig,
} from './config-reducer.js';

describe('the config reducer', () => {
  it('holds the loaded config, and keeps it beside a later error', () => {
    const config = { file: '/d/postern.yaml', routes: [], ssh_hosts: [], edited_since_start: false };
    const loaded = configReducer(configReducer(initialConfigView, { type: 'requested' }), {
      type: 'received',
      reply: { ok: true, value: config },
    });
    expect(loaded).toMatchObject({ phase: 'ready', config, error: null });
    expect(
      configReducer(loaded, { type: 'received', reply: { ok: false, error: { code: 'X', message: 'm' } } }),
    ).toMatchObject({ phase: 'error', config });
  });
});

describe('the config reducer: edits of the file', () => {
  it('an edit in flight, then written: the names the next start will load are kept', () => {
    const started = configReducer(
      { ...initialConfigView, confirming: 'route:docs' },
      { type: 'edit_started', op: 'remove_route' },
    );
    expect(started).toMatchObject({ editing: 'remove_route', confirming: null, edited: null });
    const file = { file: '/d/postern.yaml', routes: ['status'], ssh_hosts: [], applies: 'next_start' as const };
    expect(
      configReducer(started, { type: 'edit_finished', op: 'remove_route', reply: { ok: true, value: file } }),
    ).toMatchObject({ editing: null, edited: { ok: true, file } });
  });

  it('a refused edit shows the code and field', () => {
    const view = configReducer(configReducer(initialConfigView, { type: 'edit_started', op: 'add_route' }), {
      type: 'edit_finished',
      op: 'add_route',
      reply: {
        ok: false,
        error: { code: 'CONFIG_INVALID', message: 'routes[1].base_url: not a URL', field: 'routes[1].base_url' },
      },
    });
    expect(view.edited).toMatchObject({ ok: false, error: { code: 'CONFIG_INVALID', field: 'routes[1].base_url' } });
  });

  it.each([
    ['GET, post', ['GET', 'POST']],
    ['', []],
  ])('methods typed as %j are %j', (text, methods) => {
    expect(parseMethods(text)).toEqual(methods);
  });
});

describe('the config reducer: a change of postern.yaml made outside Postern', () => {
  const digest = `sha256:${'a'.repeat(64)}`;
  const pending = {
    trust: 'verified' as const,
    untrusted_reason: null,
    accepted: null,
    restart_needed: false,
    accept_applies: 'next_start' as const,
    change: {
      file: '/d/postern.yaml',
      digest,
      routes: [
        {
          name: 'docs',
          change: 'changed' as const,
          fields: [{ field: 'approval', before: 'per_call', after: 'none' }],
        },
      ],
      ssh_hosts: [],
      mcp_servers: [],
      settings: [],
      invalid: null,
    },
  };

  it('holds the card, and keeps it when a later read fails', () => {
    const shown = configReducer(initialConfigView, { type: 'pending_received', reply: { ok: true, value: pending } });
    expect(shown.pending).toEqual(pending);
    expect(
      configReducer(shown, {
        type: 'pending_received',
        reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'm' } },
      }).pending,
    ).toEqual(pending);
  });

  it('an accept in flight, then accepted or refused with its code', () => {
    const started = configReducer(initialConfigView, { type: 'accept_started', digest });
    expect(started).toMatchObject({ accepting: digest, accepted: null });
    const done = configReducer(started, {
      type: 'accept_finished',
      reply: { ok: true, value: { digest, applies: 'next_start' } },
    });
    expect(done).toMatchObject({ accepting: null, accepted: { ok: true, value: { digest } } });
    const refused = configReducer(started, {
      type: 'accept_finished',
      reply: { ok: false, error: { code: 'DECISION_CONFLICT', message: 'changed', field: 'digest' } },
    });
    expect(refused.accepted).toMatchObject({ ok: false, error: { code: 'DECISION_CONFLICT' } });
  });
});

describe('what the file holds after an edit, against what the broker runs', () => {
  const shown = (routes: string[], hosts: string[]): ShownConfig => ({
    file: '/d/postern.yaml',
    edited_since_start: true,
    routes: routes.map((name) => ({
      name,
      base_url: 'https://x',
      credential: 'c',
      injection: 'bearer',
      approval: 'per_call',
      methods: [],
      lanes: [],
      idempotency_header: null,
      lookup: null,
      retry_automatic: false,
      tls_pinned: false,
      credential_missing: false,
    })),
    ssh_hosts: hosts.map((name) => ({
      name,
      host: 'h',
      port: 22,
      user: 'u',
      credential: 'k',
      host_key: 'accept_new',
      approval: 'per_call',
      lane: null,
      commands: 0,
      credential_missing: false,
    })),
  });

  it('lists an added route as in the file, not loaded yet, and a removed host as gone at the next start', () => {
    const view = configReducer(initialConfigView, {
      type: 'edit_finished',
      op: 'add_route',
      reply: {
        ok: true,
        value: { file: '/d/postern.yaml', routes: ['docs', 'status'], ssh_hosts: [], applies: 'next_start' },
      },
    });
    expect(fileChanges(shown(['docs'], ['web-1']), view.edited)).toEqual({
      file: '/d/postern.yaml',
      applies: 'next_start',
      routes: { added: ['status'], removed: [] },
      ssh_hosts: { added: [], removed: ['web-1'] },
    });
    expect(appliesWords('next_start')).toBe('applies at the next start');
  });

  it('shows nothing before an edit or after a refused one, and no difference once the broker runs the file', () => {
    expect(fileChanges(shown(['docs'], []), null)).toBeNull();
    const refused = configReducer(initialConfigView, {
      type: 'edit_finished',
      op: 'add_route',
      reply: { ok: false, error: { code: 'INVALID_ARGUMENT', message: 'x' } },
    });
    expect(fileChanges(shown(['docs'], []), refused.edited)).toBeNull();
    const inForce = {
      ok: true as const,
      op: 'add_route' as const,
      file: { file: '/d/postern.yaml', routes: ['docs'], ssh_hosts: [], applies: 'now' as const },
    };
    expect(fileChanges(shown(['docs'], []), inForce)).toMatchObject({
      applies: 'now',
      routes: { added: [], removed: [] },
    });
    expect(appliesWords('now')).toBe('in force now');
  });
});

describe('while postern.yaml is not accepted (every route refused)', () => {
  const reason =
    'there is no accepted copy of postern.yaml: only the file present when a person creates the vault is trusted on first use, so a person accepts this one before anything is sent';
  const pending = (over: Partial<PendingConfig>): PendingConfig => ({
    trust: 'verified',
    untrusted_reason: null,
    accepted: null,
    restart_needed: false,
    accept_applies: 'now',
    change: null,
    ...over,
  });

  it('the console-wide banner says every route is refused, why (as a sentence), and where to accept it', () => {
    expect(configTrustBanner(pending({ trust: 'untrusted', untrusted_reason: reason }))).toEqual({
      headline: 'Every route and SSH host is refused: postern.yaml is not accepted',
      detail: `T${reason.slice(1)}.`,
      next: 'Review and accept it in Routes & hosts',
      href: '#/routes',
    });
  });

  it('after an acceptance that waits for a restart, the banner says to restart', () => {
    expect(
      configTrustBanner(pending({ trust: 'untrusted', untrusted_reason: reason, restart_needed: true })),
    ).toMatchObject({
      headline: 'Every route and SSH host is refused until the broker restarts',
      next: 'Restart the broker',
    });
  });

  it('no banner while routes can run, whatever the trust short of untrusted, nor before anything was read', () => {
    for (const trust of ['first_use', 'unverified', 'verified'] as const)
      expect(configTrustBanner(pending({ trust }))).toBeNull();
    expect(configTrustBanner(null)).toBeNull();
  });

  it('a reason joined to the next sentence ends with a full stop, once', () => {
    expect(sentence('a person accepts this one before anything is sent')).toBe(
      'A person accepts this one before anything is sent.',
    );
    expect(sentence('The accepted configuration failed its check.')).toBe(
      'The accepted configuration failed its check.',
    );
  });

  it('the Routes & hosts heading says the lists are the ones in force now, or that all are refused', () => {
    expect(routesHeadingWords(pending({ trust: 'verified' }))).toBe('as the broker runs them now');
    expect(routesHeadingWords(null)).toBe('as the broker runs them now');
    expect(routesHeadingWords(pending({ trust: 'untrusted', untrusted_reason: reason }))).toBe(
      'as loaded, all refused until postern.yaml is accepted',
    );
  });
});
