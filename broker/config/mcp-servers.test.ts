import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentToolNames, isCodedError } from '../contract/index.js';
import { credentialNamePattern } from '../vault/index.js';
import { diffConfigs, envCredentialNote, exposeEnvCredentialsNote } from './config-diff.js';
import { parseConfig } from './load-config.js';
import {
  mcpCredentialNamePattern,
  mcpCredentialRefs,
  mcpGlobMatches,
  mcpToolPolicy,
  parseCredentialRefs,
  parseMcpToolName,
  renderMcpEnv,
  sanitizeMcpToolName,
} from './mcp-servers.js';
import type { McpServerSettings } from './config-schema.js';
import { configRefusal } from '../testing/config-refusal.js';

const stdio = (extra: string[] = [], name = 'files'): string[] => [
  `  - name: ${name}`,
  '    transport: stdio',
  '    command: /usr/bin/node',
  ...extra,
];
const remote = (extra: string[] = [], url = 'https://mcp.example.com/mcp'): string[] => [
  '  - name: remote',
  '    transport: streamable_http',
  `    url: ${url}`,
  ...extra,
];
const config = (...lines: string[]): string => ['version: 1', 'mcp_servers:', ...lines, ''].join('\n');
const server = (...lines: string[]): McpServerSettings => {
  const loaded = [...parseConfig(config(...lines)).mcpServers.values()][0];
  if (loaded === undefined) throw new Error('no server loaded');
  return loaded;
};

const refusal = configRefusal;

describe('when mcp_servers is loaded', () => {
  it('fills the defaults and keeps absent stdio fields absent', () => {
    const files = server(...stdio());
    expect(files).toEqual({
      name: 'files',
      transport: 'stdio',
      command: '/usr/bin/node',
      approval: 'per_call',
      tools: [],
      warm_ms: 300_000,
    });
    expect(parseConfig('version: 1\n').mcpServers.size).toBe(0);
  });

  it('loads both transports with env references, rules, lanes and a loopback http:// url', () => {
    const loaded = parseConfig(
      config(
        ...stdio([
          "    args: ['/opt/mcp/server.js', '--root', '/srv']",
          '    cwd: /srv',
          '    env:',
          "      API_TOKEN: 'Bearer {credential:files-token}'",
          "      MODE: 'read-write'",
          '    expose_env_credentials: true',
          '    rules_may_loosen: true',
          '    lane: null',
          '    tools:',
          "      - { match: 'read_*', approval: none }",
          "      - { match: 'write_*', approval: per_call, lane: files-write }",
          '    timeout_ms: 60000',
          '    warm_ms: 0',
        ]),
        ...remote(['    credential: remote-token', '    approval: session'], 'http://127.0.0.1:8931/mcp'),
      ),
    ).mcpServers;
    expect(loaded.get('files')).toMatchObject({
      args: ['/opt/mcp/server.js', '--root', '/srv'],
      env: { API_TOKEN: 'Bearer {credential:files-token}', MODE: 'read-write' },
      lane: null,
      timeout_ms: 60_000,
      warm_ms: 0,
    });
    expect(loaded.get('remote')).toMatchObject({ url: 'http://127.0.0.1:8931/mcp', credential: 'remote-token' });
  });

  it('loads the mcp_servers of docs/config.md’s full example', () => {
    const doc = readFileSync(fileURLToPath(new URL('../../docs/config.md', import.meta.url)), 'utf8');
    const example = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
    const loaded = parseConfig(example).mcpServers;
    expect([...loaded.keys()]).toEqual(['files', 'tracker', 'wiki']);
    expect(loaded.get('wiki')?.oauth).toEqual({ scopes: ['wiki.read'] });
    expect(mcpCredentialRefs(loaded.get('files') as McpServerSettings)).toEqual(['files-token']);
  });

  it.each<[string, string[], string, RegExp]>([
    ['a name with capitals', stdio([], 'Files'), 'mcp_servers[0].name', /lower-case/],
    ['a name used twice', [...stdio(), ...stdio()], 'mcp_servers[1].name', /used twice/],
    ["an operator method's namespace", stdio([], 'approvals'), 'mcp_servers[0].name', /operator's methods/],
    ['another operator namespace', stdio([], 'vault'), 'mcp_servers[0].name', /operator's methods/],
    ['no transport', ['  - name: files', '    command: /usr/bin/node'], 'mcp_servers[0].transport', /./],
    ['an unknown transport', ['  - name: files', '    transport: sse'], 'mcp_servers[0].transport', /./],
    ['stdio without command', ['  - name: files', '    transport: stdio'], 'mcp_servers[0].command', /required/],
    [
      'a command looked up in PATH',
      ['  - name: files', '    transport: stdio', '    command: node'],
      'mcp_servers[0].command',
      /absolute/,
    ],
    [
      'a command with a NUL',
      ['  - name: files', '    transport: stdio', '    command: "/usr/bin/no\\0de"'],
      'mcp_servers[0].command',
      /NUL/,
    ],
    ['a relative cwd', stdio(['    cwd: srv']), 'mcp_servers[0].cwd', /absolute/],
    [
      'a url on stdio',
      stdio(['    url: https://x.example']),
      'mcp_servers[0].url',
      /only for transport streamable_http/,
    ],
    ['a credential on stdio', stdio(['    credential: t']), 'mcp_servers[0].credential', /streamable_http/],
    [
      'a credential in argv',
      stdio(["    args: ['--token', '{credential:t}']"]),
      'mcp_servers[0].args[1]',
      /env.*argv is visible/,
    ],
    ['PATH in env', stdio(['    env: { PATH: /tmp/evil }']), 'mcp_servers[0].env.PATH', /what the child runs/],
    ['Path in env', stdio(['    env: { Path: /tmp/evil }']), 'mcp_servers[0].env.Path', /what the child runs/],
    ['LD_PRELOAD in env', stdio(['    env: { LD_PRELOAD: /x.so }']), 'mcp_servers[0].env.LD_PRELOAD', /LD_\*/],
    ['DYLD_ in env', stdio(['    env: { DYLD_INSERT_LIBRARIES: x }']), 'mcp_servers[0].env.DYLD_INSERT_LIBRARIES', /./],
    ['NODE_OPTIONS in env', stdio(['    env: { NODE_OPTIONS: --require=x }']), 'mcp_servers[0].env.NODE_OPTIONS', /./],
    ['a bad env name', stdio(["    env: { '1X': y }"]), 'mcp_servers[0].env.1X', /environment variable name/],
    [
      'a credential in env without expose_env_credentials',
      stdio(["    env: { T: 'Bearer {credential:abc}', M: plain }"]),
      'mcp_servers[0].env.T',
      /expose_env_credentials: true .*every process running as you can read \(\/proc\/PID\/environ\).*streamable_http/,
    ],
    [
      'expose_env_credentials on streamable_http',
      [
        '  - name: r',
        '    transport: streamable_http',
        '    url: https://x.example/mcp',
        '    expose_env_credentials: true',
      ],
      'mcp_servers[0].expose_env_credentials',
      /only for transport stdio/,
    ],
    [
      'expose_env_credentials: false (only true says anything)',
      stdio(['    expose_env_credentials: false']),
      'mcp_servers[0].expose_env_credentials',
      /./,
    ],
    ['an unclosed reference', stdio(["    env: { T: '{credential:abc' }"]), 'mcp_servers[0].env.T', /not closed/],
    [
      'a nested reference',
      stdio(["    env: { T: '{credential:{credential:a}}' }"]),
      'mcp_servers[0].env.T',
      /not closed/,
    ],
    [
      'a reference to no possible credential',
      stdio(["    env: { T: '{credential:bad name}' }"]),
      'mcp_servers[0].env.T',
      /does not name a credential/,
    ],
    [
      'too many env entries',
      stdio(['    env:', ...Array.from({ length: 65 }, (_, i) => `      V${i}: x`)]),
      'mcp_servers[0].env',
      /at most 64/,
    ],
    [
      'streamable_http without url',
      ['  - name: r', '    transport: streamable_http'],
      'mcp_servers[0].url',
      /required/,
    ],
    [
      'a command on streamable_http',
      remote(['    command: /bin/x']),
      'mcp_servers[0].command',
      /only for transport stdio/,
    ],
    ['env on streamable_http', remote(['    env: { A: b }']), 'mcp_servers[0].env', /only for transport stdio/],
    ['oauth on stdio', stdio(['    oauth: {}']), 'mcp_servers[0].oauth', /only for transport streamable_http/],
    [
      'oauth and credential together',
      remote(['    credential: t', '    oauth: {}']),
      'mcp_servers[0].oauth',
      /two ways to authenticate/,
    ],
    [
      'an oauth scope with a space',
      remote(["    oauth: { scopes: ['a b'] }"]),
      'mcp_servers[0].oauth.scopes[0]',
      /scope/,
    ],
    ['an unknown oauth field', remote(['    oauth: { client_secret: x }']), 'mcp_servers[0].oauth', /./],
    ['plain http to another host', remote([], 'http://mcp.example.com/mcp'), 'mcp_servers[0].url', /http:\/\/ only/],
    ['user info in the url', remote([], 'https://u:p@mcp.example.com/'), 'mcp_servers[0].url', /user info/],
    ['a fragment in the url', remote([], 'https://mcp.example.com/#x'), 'mcp_servers[0].url', /fragment/],
    ['not a url', remote([], 'mcp.example.com'), 'mcp_servers[0].url', /not a URL/],
    [
      'a rule looser than its server',
      stdio(["    tools: [{ match: 'read_*', approval: none }]"]),
      'mcp_servers[0].tools[0].approval',
      /looser.*rules_may_loosen/,
    ],
    ['a rule that changes nothing', stdio(["    tools: [{ match: 'read_*' }]"]), 'mcp_servers[0].tools[0]', /nothing/],
    [
      'a regex where a glob belongs',
      stdio(["    tools: [{ match: 'read_.*', approval: per_call }]"]),
      'mcp_servers[0].tools[0].match',
      /glob/,
    ],
    ['a negative warm_ms', stdio(['    warm_ms: -1']), 'mcp_servers[0].warm_ms', /./],
  ])('refuses %s with CONFIG_INVALID naming the field', (_what, lines, field, message) => {
    const refused = refusal(config(...lines));
    expect(refused).toMatchObject({ code: 'CONFIG_INVALID', field });
    expect(refused.message).toMatch(message);
  });

  it('refuses a server named like a route or an SSH host: a credential binding names one thing', () => {
    const text = [
      'version: 1',
      'routes:',
      '  - { name: files, base_url: https://api.example.com, credential: c, injection: bearer }',
      'mcp_servers:',
      ...stdio(),
      '',
    ].join('\n');
    expect(refusal(text)).toMatchObject({ code: 'CONFIG_INVALID', field: 'mcp_servers[0].name' });
  });

  it('accepts http:// for every loopback spelling and a looser rule with rules_may_loosen', () => {
    for (const url of ['http://127.0.0.1:1/mcp', 'http://[::1]:1/mcp', 'http://localhost:1/mcp'])
      expect(server(...remote([], url)).url).toBe(url);
    const files = server(...stdio(['    rules_may_loosen: true', "    tools: [{ match: 'read_*', approval: none }]"]));
    expect(files.tools[0]?.approval).toBe('none');
  });
});

describe('mcpToolPolicy', () => {
  const files = server(
    ...stdio([
      '    approval: session',
      '    lane: files',
      '    rules_may_loosen: true',
      '    tools:',
      "      - { match: 'read_*', approval: none }",
      "      - { match: 'write_?', lane: files-write }",
      "      - { match: '*_all', approval: per_call, lane: everything }",
    ]),
  );

  it.each<[string, ReturnType<typeof mcpToolPolicy>]>([
    ['read_file', { approval: 'none', lane: 'files', rule: 'tools[0]: read_* → none' }],
    ['write_a', { approval: 'session', lane: 'files-write', rule: 'tools[1]: write_? → session' }],
    ['write_ab', { approval: 'session', lane: 'files' }],
    ['read_all', { approval: 'none', lane: 'files', rule: 'tools[0]: read_* → none' }],
    ['delete_all', { approval: 'per_call', lane: 'everything', rule: 'tools[2]: *_all → per_call' }],
    ['list', { approval: 'session', lane: 'files' }],
  ])('decides %s by the first matching rule, else the server', (tool, expected) => {
    expect(mcpToolPolicy(files, tool)).toEqual(expected);
  });

  it('puts a tool neither a rule nor the server places in the server’s own lane: an unknown tool is a write', () => {
    const plain = server(...stdio());
    expect(mcpToolPolicy(plain, 'anything')).toEqual({ approval: 'per_call', lane: `mcp:${plain.name}` });
  });

  it('lane: null on the server or a rule says the tools only read: no lane', () => {
    const reads = server(...stdio(['    lane: null', '    tools:', "      - { match: 'write_*', lane: writes }"]));
    expect(mcpToolPolicy(reads, 'read_file').lane).toBeNull();
    expect(mcpToolPolicy(reads, 'write_file').lane).toBe('writes');
    const rule = server(...stdio(['    tools:', "      - { match: 'list_*', lane: null }"]));
    expect(mcpToolPolicy(rule, 'list_dir')).toMatchObject({ lane: null, rule: 'tools[0]: list_* → per_call' });
    expect(mcpToolPolicy(rule, 'write_file').lane).toBe(`mcp:${rule.name}`);
  });

  it.each<[string, string, boolean]>([
    ['*', '', true],
    ['a*', 'abc', true],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    ['abc', 'abcd', false],
    ['*b', 'ab\nb', true],
  ])('glob %s against %j: %s', (pattern, text, matches) => {
    expect(mcpGlobMatches(pattern, text)).toBe(matches);
  });
});

describe('credential references', () => {
  it('lists every credential a server uses once, env references first, and the vault name rule is the vault’s', () => {
    const files = server(
      ...stdio([
        "    env: { A: '{credential:x}{credential:y}', B: 'k={credential:x}', C: plain }",
        '    expose_env_credentials: true',
      ]),
    );
    expect(mcpCredentialRefs(files)).toEqual(['x', 'y']);
    expect(mcpCredentialRefs(server(...remote(['    credential: remote-token'])))).toEqual(['remote-token']);
    expect(mcpCredentialNamePattern.source).toBe(credentialNamePattern.source);
    expect(mcpCredentialNamePattern.flags).toBe(credentialNamePattern.flags);
  });

  it('renders every reference in one pass: a secret that looks like a reference stays text', () => {
    const asked: string[] = [];
    const secrets: Record<string, string> = { a: '{credential:b}', b: 'never-asked' };
    const rendered = renderMcpEnv({ T: 'x={credential:a};', M: 'plain' }, (name) => {
      asked.push(name);
      return secrets[name] ?? '';
    });
    expect(rendered).toEqual({ T: 'x={credential:b};', M: 'plain' });
    expect(asked).toEqual(['a']);
  });

  it('refuses a secret with a NUL byte without the secret in the error, and throws on a malformed reference', () => {
    let caught: unknown;
    try {
      renderMcpEnv({ T: '{credential:a}' }, () => 'canary-7f3a\0rest');
    } catch (error) {
      caught = error;
    }
    expect(isCodedError(caught) && caught.code).toBe('CREDENTIAL_MISSING');
    expect(String((caught as Error).message)).not.toContain('canary-7f3a');
    expect(() => renderMcpEnv({ T: '{credential:a' }, () => 's')).toThrow(/not closed/);
  });

  const piece = fc.oneof(
    fc.constantFrom('{', '}', ':', 'credential', '{credential:', 'a', 'b.c', ' ', '{credential:a}', '$'),
    fc.string({ maxLength: 4 }),
  );

  it('property: any value either is refused or renders with no {credential: left and every reference asked', () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const value = pieces.join('');
        const refs = parseCredentialRefs(value);
        if ('problem' in refs) {
          expect(() => renderMcpEnv({ V: value }, () => 'S')).toThrow();
          return;
        }
        const asked: string[] = [];
        const rendered = renderMcpEnv({ V: value }, (name) => {
          asked.push(name);
          return `<${name.length}>`;
        });
        expect(rendered.V).not.toContain('{credential:');
        expect(asked).toEqual(refs.names);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('agent-visible tool names', () => {
  it.each<[string, string, string | undefined]>([
    ['files', 'read_file', 'files.read_file'],
    ['files', 'Read-File_2', 'files.Read-File_2'],
    ['files', 'a'.repeat(64), `files.${'a'.repeat(64)}`],
    ['files', 'a'.repeat(65), undefined],
    ['files', '', undefined],
    ['files', 'read.file', undefined],
    ['files', 'read file', undefined],
    ['files', 'rеad', undefined], // Cyrillic е: looks like a Latin e, so it would pass for another tool
    ['files', 'a\u202eb', undefined],
    ['Files', 'read', undefined],
  ])('%s + %j → %j', (srv, tool, expected) => {
    expect(sanitizeMcpToolName(srv, tool)).toBe(expected);
    if (expected !== undefined) expect(parseMcpToolName(expected)).toEqual({ server: srv, tool });
  });

  it('can never equal one of Postern’s own tool names, and parses back only what it produced', () => {
    for (const own of agentToolNames) expect(parseMcpToolName(own)).toBeUndefined();
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9_-]{0,31}$/), fc.string({ maxLength: 70 }), (srv, tool) => {
        const name = sanitizeMcpToolName(srv, tool);
        if (name === undefined) return;
        expect(agentToolNames as readonly string[]).not.toContain(name);
        expect(parseMcpToolName(name)).toEqual({ server: srv, tool });
      }),
    );
  });
});

describe('when mcp_servers change, the change card', () => {
  it('shows added, removed and changed servers with one line per env variable and per tools rule', () => {
    const before = parseConfig(
      config(
        ...stdio([
          "    env: { A: '{credential:x}', B: keep }",
          '    expose_env_credentials: true',
          "    tools: [{ match: 'r*', approval: per_call }]",
        ]),
      ),
    );
    const after = parseConfig(
      config(
        ...stdio([
          "    env: { A: '{credential:other}', B: keep }",
          '    expose_env_credentials: true',
          "    tools: [{ match: 'r*', approval: per_call }, { match: 'w*', lane: w }]",
        ]),
        ...remote(),
      ),
    );
    const changes = diffConfigs(before, after);
    expect(changes.mcp_servers).toEqual([
      {
        name: 'files',
        change: 'changed',
        fields: [
          { field: 'env.A', before: '{credential:x}', after: '{credential:other}', note: envCredentialNote },
          { field: 'tools[1]', before: null, after: '{"match":"w*","lane":"w"}' },
        ],
      },
      expect.objectContaining({ name: 'remote', change: 'added' }),
    ]);
    expect(diffConfigs(after, before).mcp_servers).toContainEqual(
      expect.objectContaining({ name: 'remote', change: 'removed' }),
    );
    expect(diffConfigs(after, after).mcp_servers).toEqual([]);
  });

  it('says beside expose_env_credentials: true what accepting it hands over to every process of the user', () => {
    const before = parseConfig(config(...stdio(['    env: { B: keep }'])));
    const after = parseConfig(
      config(...stdio(["    env: { A: '{credential:x}', B: keep }", '    expose_env_credentials: true'])),
    );
    const fields = diffConfigs(before, after).mcp_servers[0]?.fields ?? [];
    expect(fields).toContainEqual({
      field: 'expose_env_credentials',
      before: null,
      after: 'true',
      note: exposeEnvCredentialsNote,
    });
    expect(fields).toContainEqual({ field: 'env.A', before: null, after: '{credential:x}', note: envCredentialNote });
    expect(fields.find((f) => f.field === 'env.B')?.note).toBeUndefined();
    expect(exposeEnvCredentialsNote).toMatch(
      /every process running as you can read \(\/proc\/PID\/environ\), the agent/,
    );
  });
});
