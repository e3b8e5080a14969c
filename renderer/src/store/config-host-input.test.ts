import { describe, expect, it } from 'vitest';
import {
  formFieldOf,
  isIpv6,
  parsePins,
  parseSshAddress,
  emptyRouteDraft,
  routeEdit,
  routeFieldsByKey,
  sshBindingNames,
  sshCredentialUse,
  sshHostEdit,
  sshHostFieldsByKey,
  type SshCredentialContext,
  type SshHostDraft,
} from './config-host-input.js';

const pin = 'SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s';
const draft: SshHostDraft = {
  name: 'web-1',
  host: 'web-1.internal.example',
  port: '22',
  user: 'deploy',
  credential: 'deploy-key',
  pins: '',
  approval: 'per_call',
};

describe('the address of an SSH host entry', () => {
  it.each([
    ['web-1.internal.example', 'web-1.internal.example', null],
    ['  db_2  ', 'db_2', null],
    ['10.0.0.5', '10.0.0.5', null],
    ['10.0.0.5:2222', '10.0.0.5', 2222],
    ['web-1.internal:2200', 'web-1.internal', 2200],
    ['::1', '::1', null],
    ['2001:DB8::5', '2001:db8::5', null],
    ['[2001:db8::5]', '2001:db8::5', null],
    ['[2001:db8::5]:2222', '2001:db8::5', 2222],
    ['::ffff:10.0.0.5', '::ffff:10.0.0.5', null],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8', null],
  ])('takes %j as host %j, port %j', (text, host, port) => {
    expect(parseSshAddress(text)).toEqual({ ok: true, host, port });
  });

  it.each([
    '',
    'web 1',
    '10.0.0',
    '256.0.0.1',
    '[web-1]',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    'fe80::1%eth0',
    'ssh://web-1',
    'deploy@web-1',
    '-web',
  ])('refuses %j, saying what an address is', (text) => {
    const parsed = parseSshAddress(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message.length).toBeGreaterThan(10);
  });

  it('knows an IPv6 address from a host name', () => {
    expect([isIpv6('::'), isIpv6('fe80::'), isIpv6('abcd'), isIpv6('12345::1'), isIpv6('a:b')]).toEqual([
      true,
      true,
      false,
      false,
      false,
    ]);
  });
});

describe('pinned fingerprints', () => {
  it('takes commas, blanks, ssh-keygen -lf lines and base64 padding; an empty text pins nothing', () => {
    expect(parsePins('')).toEqual({ ok: true, pins: [] });
    expect(parsePins(`${pin}, ${pin}=`)).toEqual({ ok: true, pins: [pin] });
    expect(parsePins(`256 ${pin} root@web-1 (ED25519)\n${pin.replace('u', 'v')}`)).toEqual({
      ok: true,
      pins: [pin, pin.replace('u', 'v')],
    });
  });

  it('refuses a token that is not a fingerprint, and more than 8', () => {
    expect(parsePins('SHA256:short')).toMatchObject({
      ok: false,
      message: expect.stringContaining('SHA256:short is not a fingerprint'),
    });
    expect(parsePins('MD5:aa:bb')).toMatchObject({ ok: false });
    const nine = Array.from({ length: 9 }, (_, i) => `SHA256:${String(i).repeat(43)}`).join(' ');
    expect(parsePins(nine)).toEqual({ ok: false, message: 'at most 8 fingerprints' });
  });
});

describe('the Add SSH host draft as a config.edit', () => {
  it('an IPv6 address in brackets with its port and a pinned fingerprint', () => {
    expect(sshHostEdit({ ...draft, name: 'v6', host: '[2001:db8::5]:2222', port: '', pins: pin })).toEqual({
      ok: true,
      edit: {
        op: 'add_ssh_host',
        host: {
          name: 'v6',
          host: '2001:db8::5',
          port: 2222,
          user: 'deploy',
          credential: 'deploy-key',
          host_key: { pinned: [pin] },
          approval: 'per_call',
        },
      },
    });
  });

  it('no fingerprint is accept_new; an empty port is 22', () => {
    expect(sshHostEdit({ ...draft, port: '' })).toMatchObject({
      ok: true,
      edit: { host: { port: 22, host_key: 'accept_new' } },
    });
  });

  it.each<[Partial<SshHostDraft>, string, RegExp]>([
    [{ name: 'Web-1' }, 'name', /lower-case/],
    [{ host: 'web 1' }, 'host', /host name/],
    [{ port: '0' }, 'port', /from 1 to 65535/],
    [{ port: '70000' }, 'port', /from 1 to 65535/],
    [{ port: '22a' }, 'port', /whole number/],
    [{ host: '10.0.0.5:2222', port: '2200' }, 'port', /names port 2222 but Port says 2200/],
    [{ host: '[::1]:99999' }, 'host', /port in the address/],
    [{ user: 'de ploy' }, 'user', /user name/],
    [{ credential: 'deploy key' }, 'credential', /ssh_key credential/],
    [{ pins: 'SHA256:short' }, 'pins', /not a fingerprint/],
  ])('%j is refused on the field %s', (change, field, message) => {
    expect(sshHostEdit({ ...draft, ...change })).toMatchObject({
      ok: false,
      field,
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(message),
    });
  });
});

describe('the field a broker refusal names', () => {
  it.each([
    ['host.port', 'port'],
    ['ssh_hosts[3].host_key.pinned[0]', 'pins'],
    ['ssh_hosts.name', 'name'],
    ['ssh_hosts[1].host', 'host'],
    ['', null],
    ['ssh_hosts', null],
  ])('%j is the SSH form field %j', (field, expected) => {
    expect(formFieldOf({ field }, sshHostFieldsByKey)).toBe(expected);
  });

  it('reads route fields the same way', () => {
    expect(formFieldOf({ field: 'routes[2].base_url' }, routeFieldsByKey)).toBe('base_url');
    expect(formFieldOf({ field: 'route.methods.0' }, routeFieldsByKey)).toBe('methods');
    expect(formFieldOf({}, routeFieldsByKey)).toBeNull();
  });

  it.each([
    ['routes[0].aws.region', 'aws_region'],
    ['routes[0].aws.service', 'aws_service'],
    ['routes[0].aws', 'aws_region'],
    ['route.oauth2.token_url', 'token_url'],
    ['routes[4].oauth2.scopes.2', 'scopes'],
    ['routes[4].oauth2.audience', 'audience'],
    ['routes[4].oauth2', 'token_url'],
  ])('names the injection setting %s refused as the form field %s', (field, expected) => {
    expect(formFieldOf({ field }, routeFieldsByKey)).toBe(expected);
  });
});

describe('the add_route edit the route form sends', () => {
  const base = { ...emptyRouteDraft, name: ' api ', baseUrl: ' https://api.example.com ', credential: ' key ' };

  it('sends the names trimmed and no section for a plain injection, whatever was typed in a hidden field', () => {
    expect(routeEdit({ ...base, injection: 'header', awsRegion: 'eu-west-1', tokenUrl: 'https://t' })).toEqual({
      op: 'add_route',
      route: {
        name: 'api',
        base_url: 'https://api.example.com',
        credential: 'key',
        injection: 'header',
        approval: 'per_call',
      },
    });
  });

  it('sends the signing scope of an aws_sigv4 route, and only that section', () => {
    const edit = routeEdit({
      ...base,
      injection: 'aws_sigv4',
      awsRegion: ' eu-west-1 ',
      awsService: 'execute-api',
      tokenUrl: 'x',
    });
    expect(edit.route).toMatchObject({ injection: 'aws_sigv4', aws: { region: 'eu-west-1', service: 'execute-api' } });
    expect(edit.route).not.toHaveProperty('oauth2');
  });

  it('sends the token endpoint of an oauth2 route, scopes split on spaces or commas, an audience only when typed', () => {
    const draft = {
      ...base,
      injection: 'oauth2_client_credentials' as const,
      tokenUrl: ' https://auth.example.com/token ',
    };
    expect(
      routeEdit({ ...draft, scopes: 'read:docs, write:docs  admin', audience: ' https://api ' }).route,
    ).toMatchObject({
      oauth2: {
        token_url: 'https://auth.example.com/token',
        scopes: ['read:docs', 'write:docs', 'admin'],
        audience: 'https://api',
      },
    });
    expect(routeEdit(draft).route.oauth2).toEqual({ token_url: 'https://auth.example.com/token' });
    expect(routeEdit(draft).route).not.toHaveProperty('aws');
  });
});

describe('the credential an SSH host entry will use', () => {
  const key = { name: 'deploy-key', kind: 'ssh_key' as const, version_tag: 'v1-abc', bindings: ['web-9'] };
  const context = (
    credentials: SshCredentialContext['credentials'],
    dataDir: string | null = null,
  ): SshCredentialContext => ({ listed: true, credentials, dataDir });

  it('says nothing without a name, and nothing sure before the list answered', () => {
    expect(sshCredentialUse({ ...draft, credential: ' ' }, context([key]))).toBeNull();
    expect(sshCredentialUse(draft, { listed: false, credentials: [], dataDir: null })).toEqual({ state: 'unknown' });
  });

  it('bound by the host, host:port or [host]:port, any case', () => {
    for (const binding of ['web-1.internal.example', 'WEB-1.internal.example:22', '[web-1.internal.example]:22']) {
      expect(sshCredentialUse(draft, context([{ ...key, bindings: ['other', binding] }]))).toEqual({
        state: 'bound',
        credential: 'deploy-key',
        via: binding,
        version_tag: 'v1-abc',
      });
    }
    const v6 = { ...draft, host: '2001:db8::5', port: '2222' };
    expect(sshCredentialUse(v6, context([{ ...key, bindings: ['[2001:db8::5]:2222'] }]))).toMatchObject({
      state: 'bound',
    });
    expect(sshCredentialUse(v6, context([{ ...key, bindings: ['[2001:db8::5]:22'] }]))).toMatchObject({
      state: 'unbound',
    });
  });

  it('bound by the entry name alone: a warning whose fix binds the host too (the broker refuses the add without it)', () => {
    expect(sshCredentialUse({ ...draft, name: 'web-2' }, context([{ ...key, bindings: ['web-1'] }]))).toMatchObject({
      state: 'unbound',
    });
    expect(sshCredentialUse(draft, context([{ ...key, bindings: ['WEB-1'] }]))).toEqual({
      state: 'name_only',
      credential: 'deploy-key',
      name: 'web-1',
      host: 'web-1.internal.example',
      fix: 'postern vault bind deploy-key --bind WEB-1 --bind web-1.internal.example',
    });
  });

  it('unbound: the fix keeps the old bindings, adds the host, and names the data directory', () => {
    expect(
      sshCredentialUse(
        { ...draft, host: '[2001:db8::5]:2222' },
        context([{ ...key, bindings: ['[::1]:22'] }], '/home/op/.postern data'),
      ),
    ).toEqual({
      state: 'unbound',
      credential: 'deploy-key',
      bindings: ['[::1]:22'],
      fix: "postern vault bind deploy-key --bind '[::1]:22' --bind 2001:db8::5 --data-dir '/home/op/.postern data'",
    });
  });

  it('missing from the vault, or not an SSH key', () => {
    expect(sshCredentialUse(draft, context([]))).toEqual({
      state: 'missing',
      credential: 'deploy-key',
      fix: 'postern vault add deploy-key --kind ssh_key --bind web-1.internal.example --from-stdin < KEY_FILE',
    });
    expect(sshCredentialUse(draft, context([{ ...key, kind: 'bearer' }]))).toEqual({
      state: 'wrong_kind',
      credential: 'deploy-key',
      kind: 'bearer',
    });
  });

  it('the names a binding may use', () => {
    expect(sshBindingNames({ name: 'v6', host: '[::1]:2222', port: '22' })).toEqual({
      name: 'v6',
      hosts: ['::1', '::1:2222', '[::1]:2222'],
    });
    expect(sshBindingNames({ name: 'Bad Name', host: 'no good', port: '' })).toEqual({ name: null, hosts: [] });
  });
});
