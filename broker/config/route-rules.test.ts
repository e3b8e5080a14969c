import { describe, expect, it } from 'vitest';
import { diffConfigs } from './config-diff.js';
import { parseConfig } from './load-config.js';
import { configRefusal } from '../testing/config-refusal.js';

/** One route on one base URL: reads unattended, writes on a card (the docs/config.md example). */
const route = (extra: string[]): string =>
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    '    base_url: https://api.example.com/v1',
    '    credential: docs-token',
    '    injection: bearer',
    ...extra,
    '',
  ].join('\n');

const oneBaseUrl = [
  '    approval: per_call',
  '    rules_may_loosen: true',
  '    rules:',
  '      - { methods: [GET, HEAD], path: /**, approval: none }',
  "      - { methods: ['*'], path: '/documents/{id}/**', approval: per_call, lane: 'document-{id}' }",
];

const refusal = configRefusal;

describe('when a route declares method/path rules', () => {
  it('loads them in order with the route approval as the fallback', () => {
    const docs = parseConfig(route(oneBaseUrl)).routes.get('docs');
    expect(docs?.approval).toBe('per_call');
    expect(docs?.rules_may_loosen).toBe(true);
    expect(docs?.rules).toEqual([
      { methods: ['GET', 'HEAD'], path: '/**', approval: 'none' },
      { methods: ['*'], path: '/documents/{id}/**', approval: 'per_call', lane: 'document-{id}' },
    ]);
  });

  it('leaves a route without rules exactly as before (no rules field, nothing to diff)', () => {
    const docs = parseConfig(route([])).routes.get('docs');
    expect(docs).not.toHaveProperty('rules');
    expect(docs).not.toHaveProperty('rules_may_loosen');
  });

  it('allows a rule stricter than its route without rules_may_loosen', () => {
    const docs = parseConfig(
      route([
        '    approval: none',
        '    rules:',
        "      - { methods: [POST, DELETE], path: '/**', approval: per_call }",
      ]),
    ).routes.get('docs');
    expect(docs?.rules?.[0]?.approval).toBe('per_call');
  });
});

describe('when a rule is bad the configuration is refused naming the rule field', () => {
  it.each<[string, string[], string, string]>([
    [
      'a rule looser than its route without rules_may_loosen',
      ['    rules:', '      - { methods: [GET], path: /**, approval: none }'],
      'routes[0].rules[0].approval',
      'rules_may_loosen',
    ],
    [
      'a session rule on a per_call route without rules_may_loosen (the third rule)',
      [
        '    rules:',
        '      - { methods: [POST], path: /a, approval: per_call }',
        '      - { methods: [PUT], path: /b, approval: per_call }',
        '      - { methods: [GET], path: /c, approval: session }',
      ],
      'routes[0].rules[2].approval',
      'looser',
    ],
    [
      'a malformed path template',
      ['    rules:', '      - { methods: [GET], path: /a/**/b, approval: per_call }'],
      'routes[0].rules[0].path',
      '** may only be the last segment',
    ],
    [
      'a path without a leading slash',
      ['    rules:', '      - { methods: [GET], path: docs, approval: per_call }'],
      'routes[0].rules[0].path',
      'starts with /',
    ],
    [
      'a lane naming a parameter the path does not bind',
      ['    rules:', "      - { methods: [POST], path: '/d/{id}', approval: per_call, lane: 'doc-{name}' }"],
      'routes[0].rules[0].lane',
      '{name}',
    ],
    [
      'a method the route does not allow',
      ['    methods: [GET, POST]', '    rules:', '      - { methods: [GET, DELETE], path: /**, approval: per_call }'],
      'routes[0].rules[0].methods[1]',
      'DELETE',
    ],
    [
      'an unknown approval mode',
      ['    rules:', '      - { methods: [GET], path: /**, approval: never }'],
      'routes[0].rules[0].approval',
      '',
    ],
    [
      'a rule without an approval',
      ['    rules:', '      - { methods: [GET], path: /** }'],
      'routes[0].rules[0].approval',
      '',
    ],
    [
      'an unknown rule field',
      ['    rules:', '      - { methods: [GET], path: /**, approval: per_call, command: ls }'],
      'routes[0].rules[0]',
      '',
    ],
    [
      'an empty method list',
      ['    rules:', '      - { methods: [], path: /**, approval: per_call }'],
      'routes[0].rules[0].methods',
      '',
    ],
  ])('%s', (_when, extra, field, words) => {
    const r = refusal(route(extra));
    expect(r.code).toBe('CONFIG_INVALID');
    expect(r.field).toBe(field);
    expect(r.message).toContain(`${field}:`);
    expect(r.message).toContain(words);
  });
});

describe('when operator.port is set', () => {
  it('loads a port from 1 to 65535', () => {
    expect(parseConfig('version: 1\noperator:\n  port: 47123\n').operator?.port).toBe(47123);
    expect(parseConfig('version: 1\n').operator?.port).toBeUndefined();
  });

  it.each([
    ['0', 0],
    ['65536', 65536],
    ['a string', '"8080"'],
    ['a fraction', 80.5],
  ])('refuses %s naming operator.port', (_when, value) => {
    const r = refusal(`version: 1\noperator:\n  port: ${value}\n`);
    expect(r).toMatchObject({ code: 'CONFIG_INVALID', field: 'operator.port' });
  });
});

describe('the pending-change card shows rule changes as field changes', () => {
  const looser = [...oneBaseUrl];
  looser[3] = '      - { methods: [GET, HEAD, POST], path: /**, approval: none }';

  it('names the one rule that changed, before and after', () => {
    const [change] = diffConfigs(parseConfig(route(oneBaseUrl)), parseConfig(route(looser))).routes;
    expect(change).toEqual({
      name: 'docs',
      change: 'changed',
      fields: [
        {
          field: 'rules[0]',
          before: '{"methods":["GET","HEAD"],"path":"/**","approval":"none"}',
          after: '{"methods":["GET","HEAD","POST"],"path":"/**","approval":"none"}',
        },
      ],
    });
  });

  it('shows an added rule list and the loosening switch as their own fields, in order', () => {
    const [change] = diffConfigs(parseConfig(route([])), parseConfig(route(oneBaseUrl))).routes;
    expect(change?.fields.map((f) => [f.field, f.before])).toEqual([
      ['rules[0]', null],
      ['rules[1]', null],
      ['rules_may_loosen', null],
    ]);
    expect(change?.fields[1]?.after).toContain('document-{id}');
  });

  it('shows a removed rule and a changed operator.port', () => {
    const before = parseConfig(route(oneBaseUrl));
    const after = parseConfig(
      route(oneBaseUrl.slice(0, 4)).replace('version: 1\n', 'version: 1\noperator:\n  port: 47123\n'),
    );
    const changes = diffConfigs(before, after);
    expect(changes.routes[0]?.fields).toEqual([
      { field: 'rules[1]', before: expect.stringContaining('/documents/{id}/**') as unknown, after: null },
    ]);
    expect(changes.settings).toEqual([
      { name: 'operator', change: 'changed', fields: [{ field: 'port', before: null, after: '47123' }] },
    ]);
  });
});
