import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { configJsonSchema } from './config-schema.js';
import { loadConfig, parseConfig } from './load-config.js';

const docsDir = fileURLToPath(new URL('../../docs/', import.meta.url));

function refusal(run: () => unknown): { code: string; field: string | undefined; message: string } {
  try {
    run();
  } catch (error) {
    if (isCodedError(error)) return { code: error.code, field: error.field, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

const minimal = `version: 1
routes:
  - name: docs
    base_url: http://127.0.0.1:8080/api
    credential: docs-token
    injection: bearer
`;

describe('when the documented example is loaded', () => {
  it('docs/config.md’s full example is a valid configuration', () => {
    const doc = readFileSync(join(docsDir, 'config.md'), 'utf8');
    const example = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(example).toBeDefined();
    const config = parseConfig(example ?? '');
    const docs = config.routes.get('docs');
    expect(docs).toMatchObject({
      origin: 'https://docs.example.com',
      base_path: '/api/v1',
      port: 443,
      approval: 'per_call',
    });
    expect(docs?.lanes[0]?.lane).toBe('document-{id}');
    expect(docs?.rules?.map((r) => r.approval)).toEqual(['none', 'per_call']);
    expect(config.operator?.port).toBe(7777);
    expect(config.routes.get('metrics')).toMatchObject({ approval: 'none', port: 9090, hostname: '127.0.0.1' });
  });

  it('fills defaults: approval per_call, every method, no lanes, reads do not bypass', () => {
    const route = parseConfig(minimal).routes.get('docs');
    expect(route).toMatchObject({ approval: 'per_call', reads_bypass_lanes: false, lanes: [], base_path: '/api' });
    expect(route?.methods).toContain('PATCH');
    expect(route?.idempotent_methods).toEqual(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
  });
});

describe('when the agents section is absent or partial', () => {
  it('defaults to required session approval, a 300 s request TTL and a grant for the life of the process', () => {
    expect(parseConfig(minimal).agents).toEqual({ session_approval: 'required', approval_ttl_seconds: 300 });
    expect(
      parseConfig(minimal.replace('version: 1\n', 'version: 1\nagents:\n  session_approval: observe\n')).agents,
    ).toEqual({ session_approval: 'observe', approval_ttl_seconds: 300 });
  });

  it('keeps the two clocks apart', () => {
    const agents = parseConfig(
      minimal.replace(
        'version: 1\n',
        'version: 1\nagents:\n  approval_ttl_seconds: 30\n  session_grant_ttl_seconds: 3600\n',
      ),
    ).agents;
    expect(agents).toEqual({ session_approval: 'required', approval_ttl_seconds: 30, session_grant_ttl_seconds: 3600 });
  });
});

describe('when the results section is absent or set', () => {
  it('keeps results fetchable for 7 days by default, or for the configured time', () => {
    expect(parseConfig(minimal).results).toEqual({ retention_seconds: 604_800 });
    expect(
      parseConfig(minimal.replace('version: 1\n', 'version: 1\nresults:\n  retention_seconds: 3600\n')).results,
    ).toEqual({ retention_seconds: 3600 });
  });
});

describe('when the configuration is bad it is refused naming the field', () => {
  const route = (extra: string) => `${minimal}${extra}`;
  it.each([
    [
      'a bad lane template',
      route(
        `    lanes:\n      - methods: [POST]\n        path: /a/{id}\n        lane: a\n      - methods: [POST]\n        path: /a/**/b\n        lane: b\n`,
      ),
      'routes[0].lanes[1].path',
    ],
    [
      'a lane naming an unknown parameter',
      route(`    lanes:\n      - methods: [POST]\n        path: /a/{id}\n        lane: a-{doc}\n`),
      'routes[0].lanes[0].lane',
    ],
    ['an unknown injection mode', minimal.replace('bearer', 'cookie'), 'routes[0].injection'],
    ['an unknown approval mode', route('    approval: sometimes\n'), 'routes[0].approval'],
    ['an unknown field', route('    proxy: http://x\n'), 'routes[0]'],
    ['a base_url with user info', minimal.replace('http://127.0.0.1', 'http://u:p@127.0.0.1'), 'routes[0].base_url'],
    ['a base_url with a query', minimal.replace('/api', '/api?x=1'), 'routes[0].base_url'],
    ['an ftp base_url', minimal.replace('http://', 'ftp://'), 'routes[0].base_url'],
    ['a bad pin', route('    tls: {pins: [abc]}\n'), 'routes[0].tls'],
    ['a duplicate route name', `${minimal}${minimal.split('routes:\n')[1]}`, 'routes[1].name'],
    [
      'a lookup using the key without a contract',
      route('    lookup:\n      method: GET\n      path: /ops/{idempotency_key}\n'),
      'routes[0].lookup.path',
    ],
    ['a wrong version', minimal.replace('version: 1', 'version: 2'), 'version'],
    [
      'an unknown session approval mode',
      minimal.replace('version: 1\n', 'version: 1\nagents:\n  session_approval: sometimes\n'),
      'agents.session_approval',
    ],
    [
      'a zero approval TTL',
      minimal.replace('version: 1\n', 'version: 1\nagents:\n  approval_ttl_seconds: 0\n'),
      'agents.approval_ttl_seconds',
    ],
    [
      'a fractional grant TTL',
      minimal.replace('version: 1\n', 'version: 1\nagents:\n  session_grant_ttl_seconds: 1.5\n'),
      'agents.session_grant_ttl_seconds',
    ],
    [
      'an unknown agents field',
      minimal.replace('version: 1\n', 'version: 1\nagents:\n  auto_approve: true\n'),
      'agents',
    ],
    [
      'a retention under a minute',
      minimal.replace('version: 1\n', 'version: 1\nresults:\n  retention_seconds: 5\n'),
      'results.retention_seconds',
    ],
    ['an unknown results field', minimal.replace('version: 1\n', 'version: 1\nresults:\n  keep: forever\n'), 'results'],
  ])('%s', (_when, text, field) => {
    const r = refusal(() => parseConfig(text));
    expect(r.code).toBe('CONFIG_INVALID');
    expect(r.field?.startsWith(field)).toBe(true);
    expect(r.message).toContain(r.field);
  });

  it('invalid YAML and duplicate keys say where', () => {
    expect(refusal(() => parseConfig('version: 1\nversion: 1\n'))).toMatchObject({ code: 'CONFIG_INVALID', field: '' });
    expect(refusal(() => parseConfig('routes: [\n')).message).toMatch(/line \d+/);
  });
});

describe('when loading from the data directory', () => {
  let dir: TempDir;
  beforeEach(() => {
    dir = createTempDir('postern-config-');
  });
  afterEach(() => dir.remove());

  it('reads <dataDir>/postern.yaml, and a missing default file means no routes', () => {
    expect(loadConfig({ dataDir: dir.path }).routes.size).toBe(0);
    expect(loadConfig({ dataDir: dir.path }).agents).toEqual({
      session_approval: 'required',
      approval_ttl_seconds: 300,
    });
    expect(loadConfig({ dataDir: dir.path }).results).toEqual({ retention_seconds: 604_800 });
    writeFileSync(join(dir.path, 'postern.yaml'), minimal);
    expect(loadConfig({ dataDir: dir.path }).routes.has('docs')).toBe(true);
  });

  it('a missing --config file is an error', () => {
    expect(refusal(() => loadConfig({ dataDir: dir.path, file: join(dir.path, 'nope.yaml') }))).toMatchObject({
      code: 'CONFIG_INVALID',
    });
  });

  it('reads tls.ca_file once at load and refuses a file that is not PEM', () => {
    const ca = join(dir.path, 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const https = minimal.replace('http://', 'https://');
    expect(parseConfig(`${https}    tls: {ca_file: ${ca}}\n`).routes.get('docs')?.ca_pem).toContain(
      'BEGIN CERTIFICATE',
    );
    writeFileSync(ca, 'not a certificate');
    expect(refusal(() => parseConfig(`${https}    tls: {ca_file: ${ca}}\n`))).toMatchObject({
      field: 'routes[0].tls.ca_file',
    });
    expect(refusal(() => parseConfig(`${https}    tls: {ca_file: ${join(dir.path, 'missing.pem')}}\n`))).toMatchObject({
      field: 'routes[0].tls.ca_file',
    });
  });
});

describe('the shipped JSON Schema', () => {
  it('docs/postern-config.schema.json equals the one generated from the zod schema (run scripts/write-config-schema.mjs)', () => {
    const committed: unknown = JSON.parse(readFileSync(join(docsDir, 'postern-config.schema.json'), 'utf8'));
    expect(committed).toEqual(configJsonSchema());
  });
});
