import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import { mcpCardPreview, previewFromTarget } from '../queue/card-preview.js';
import { deliver, mcpCredentialAuthorization, mcpRequestFingerprint, mcpResultBytesMax } from './execute-mcp-action.js';
import { mcpSecrets } from './mcp-server-secrets.js';

const canary = 'CANARY-mcp-deliver-7d1e0b';
const server = { name: 'files' } as Parameters<typeof deliver>[0]['server'];

/** One server of each kind a secret can reach: stdio env, streamable_http header, OAuth grant, and none. */
const config = parseConfig(
  [
    'version: 1',
    'mcp_servers:',
    '  - name: files',
    '    transport: stdio',
    '    command: /usr/bin/node',
    '    env: { API_TOKEN: "{credential:files-token}", MODE: "ro" }',
    '    expose_env_credentials: true',
    '  - name: remote',
    '    transport: streamable_http',
    '    url: https://mcp.example.com/mcp',
    '    credential: remote-token',
    '  - name: wiki',
    '    transport: streamable_http',
    '    url: https://wiki.example.com/mcp',
    '    oauth: {}',
    '  - name: plain',
    '    transport: stdio',
    '    command: /usr/bin/node',
    '',
  ].join('\n'),
);

/** The credential `name` as the vault opens it for a call: the bearer token is the canary. */
const opened = (name: string, versionTag: string) => ({
  name,
  info: { id: `cred_${name}`, name, kind: 'bearer' as const, version_tag: versionTag, bindings: [] },
  secret: { kind: 'bearer' as const, token: canary },
});

describe('what an agent receives of an upstream reply', () => {
  it('has every form of a secret given to the server redacted, in content and structured content alike', async () => {
    const reply = {
      content: [
        { type: 'text', text: `token=${canary}` },
        { type: 'text', text: Buffer.from(canary).toString('base64') },
      ],
      structuredContent: { echoed: canary, nested: { header: `Bearer ${canary}` } },
      isError: false,
    };
    const out = await deliver({ server, tool: 'env' }, reply, [canary, `Bearer ${canary}`]);
    expect(out.body.toString('utf8')).not.toContain(canary);
    expect(out.body.toString('utf8')).not.toContain(Buffer.from(canary).toString('base64'));
    expect(JSON.stringify(out.result)).not.toContain(canary);
    expect(out.result.content).toHaveLength(2);
    expect(out.result.truncated).toBe(false);
  });

  it('keeps a reply with no secret in it byte for byte, with the digest and size of what is delivered', async () => {
    const reply = { content: [{ type: 'text', text: 'hello' }], structuredContent: { n: 1 }, isError: true };
    const out = await deliver({ server, tool: 'echo' }, reply, [canary]);
    expect(out.result).toMatchObject({ server: 'files', tool: 'echo', is_error: true, structured_content: { n: 1 } });
    expect(out.result.content).toEqual(reply.content);
    expect(out.result.bytes).toBe(out.body.length);
    expect(out.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('cuts whole content blocks past the bound and says so', async () => {
    const block = { type: 'text', text: 'x'.repeat(300 * 1024) };
    const out = await deliver({ server, tool: 'flood' }, { content: [block, block, block, block], isError: false }, []);
    expect(out.result.truncated).toBe(true);
    expect(out.result.content).toHaveLength(3);
    expect(out.body.length).toBeLessThanOrEqual(mcpResultBytesMax + 1024);
  });
});

describe('the fingerprint a person approves', () => {
  it('ignores key order and changes with any argument', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue(), { maxKeys: 6 }), (args) => {
        const reversed = Object.fromEntries(Object.entries(args).reverse());
        expect(mcpRequestFingerprint('files', 'echo', reversed)).toBe(mcpRequestFingerprint('files', 'echo', args));
        expect(mcpRequestFingerprint('files', 'echo', { ...args, extra_marker: 1 })).not.toBe(
          mcpRequestFingerprint('files', 'echo', args),
        );
        expect(mcpRequestFingerprint('files', 'other', args)).not.toBe(mcpRequestFingerprint('files', 'echo', args));
      }),
      { numRuns: 200 },
    );
  });
});

describe('the card of an upstream call', () => {
  it('shows the server, the tool and the arguments as sent, and after a restart the tool from the record', () => {
    const card = mcpCardPreview({ name: 'files', credentials: ['files-token'] }, 'write_file', { path: '/srv/a' });
    expect(card).toMatchObject({ target: 'mcp:files', command: 'write_file', credential: 'files-token' });
    expect(JSON.parse(card.body_preview ?? 'null')).toEqual({ path: '/srv/a' });
    const restored = previewFromTarget('mcp:files call write_file', () => 'files-token');
    expect(restored).toMatchObject({ target: 'mcp:files', command: 'write_file', body_preview: null });
  });
});

describe("a server's secrets", () => {
  it('renders env references to the bare secret and lists every form for scrubbing', () => {
    const files = config.mcpServers.get('files');
    if (files === undefined) throw new Error('files not parsed');
    const s = mcpSecrets(files, [opened('files-token', 'v1')]);
    expect(s.env).toEqual({ API_TOKEN: canary, MODE: 'ro' });
    expect(s.headers).toEqual({});
    expect(s.secrets.map((b) => b.toString())).toContain(canary);
  });

  it('turns a streamable_http bearer into the authorization header and nothing else', () => {
    const remote = config.mcpServers.get('remote');
    if (remote === undefined) throw new Error('remote not parsed');
    const s = mcpSecrets(remote, [opened('remote-token', 'v1')]);
    expect(s.headers).toEqual({ authorization: `Bearer ${canary}` });
    expect(s.env).toEqual({});
  });
});

describe('what CREDENTIAL_AUTHORIZED records for a call', () => {
  const fingerprint = `sha256:${'0a'.repeat(32)}`;
  const record = (server: string, credentials: Array<ReturnType<typeof opened>> = []) => {
    const settings = config.mcpServers.get(server);
    if (settings === undefined) throw new Error(`${server} not parsed`);
    return mcpCredentialAuthorization(settings, fingerprint, credentials);
  };

  it.each([
    ['a stdio env credential', 'files', [opened('files-token', 'v7')], 'cred_files-token', 'v7', 'mcp_env'],
    [
      'a streamable_http header credential',
      'remote',
      [opened('remote-token', 'v7')],
      'cred_remote-token',
      'v7',
      'mcp_header',
    ],
    [
      'an OAuth grant, sent as the bearer although no vault credential was opened',
      'wiki',
      [],
      'mcp_oauth:wiki',
      'none',
      'mcp_oauth',
    ],
    ['nothing', 'plain', [], 'none', 'none', 'none'],
  ] as const)('%s', (_what, server, credentials, id, tag, mode) => {
    const payload = record(server, [...credentials]);
    expect(payload).toEqual({
      credential_id: id,
      version_tag: tag,
      injection_mode: mode,
      request_fingerprint: fingerprint,
    });
    expect(JSON.stringify(payload)).not.toContain(canary);
  });
});
