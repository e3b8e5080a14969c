import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { configFieldChangeSchema } from '../contract/index.js';
import { changeValueCharsMax, compareFieldNames, diffConfigs, sshCommandStarNotes } from './config-diff.js';
import { emptyConfig, parseConfig } from './load-config.js';

const route = (extra: string[] = [], baseUrl = 'https://api.example.com/v1'): string[] => [
  '  - name: docs',
  `    base_url: ${baseUrl}`,
  '    credential: docs-token',
  '    injection: bearer',
  ...extra,
];
const config = (...lines: string[]) => parseConfig(['version: 1', ...lines, ''].join('\n'));

describe('diffConfigs', () => {
  it.each<[string, string[], string[], unknown]>([
    [
      'nothing differs but the spelled-out default',
      ['routes:', ...route()],
      ['routes:', ...route(['    approval: per_call'])],
      { routes: [], ssh_hosts: [], settings: [] },
    ],
    [
      'a route is re-pointed and its approval dropped',
      ['routes:', ...route()],
      ['routes:', ...route(['    approval: none'], 'https://evil.example')],
      {
        routes: [
          {
            name: 'docs',
            change: 'changed',
            fields: [
              { field: 'base_url', before: 'https://api.example.com/v1', after: 'https://evil.example' },
              { field: 'approval', before: 'per_call', after: 'none' },
            ],
          },
        ],
      },
    ],
    [
      'a route is added',
      [],
      ['routes:', ...route()],
      {
        routes: [
          expect.objectContaining({
            name: 'docs',
            change: 'added',
            fields: expect.arrayContaining([{ field: 'base_url', before: null, after: 'https://api.example.com/v1' }]),
          }),
        ],
      },
    ],
    [
      'a route is removed',
      ['routes:', ...route()],
      [],
      { routes: [expect.objectContaining({ name: 'docs', change: 'removed' })] },
    ],
    [
      'the unattended opt-out is turned on',
      [],
      ['operator:', '  unattended_decisions: true'],
      {
        settings: [
          {
            name: 'operator',
            change: 'changed',
            fields: [{ field: 'unattended_decisions', before: 'false', after: 'true' }],
          },
        ],
      },
    ],
    [
      'an SSH host is moved',
      ['ssh_hosts:', '  - { name: web, host: 10.0.0.5, user: deploy, credential: k, host_key: accept_new }'],
      ['ssh_hosts:', '  - { name: web, host: 10.9.9.9, user: deploy, credential: k, host_key: accept_new }'],
      {
        ssh_hosts: [
          { name: 'web', change: 'changed', fields: [{ field: 'host', before: '10.0.0.5', after: '10.9.9.9' }] },
        ],
      },
    ],
  ])('when %s', (_when, before, after, expected) => {
    expect(diffConfigs(config(...before), config(...after))).toMatchObject(expected as object);
  });

  it('cuts a value longer than the card shows, saying so and where the whole is, and still sees a difference past the cut', () => {
    const lanes = (n: number, tail: string) => [
      'routes:',
      ...route([
        '    lanes:',
        ...Array.from({ length: n }, (_, i) => `      - { methods: ['*'], path: '/${i}/${'a'.repeat(200)}', lane: l }`),
        `      - { methods: ['*'], path: '/last${tail}', lane: l }`,
      ]),
    ];
    const [change] = diffConfigs(config(...lanes(40, 'x')), config(...lanes(40, 'y'))).routes;
    const after = change?.fields[0]?.after ?? '';
    expect(change?.fields[0]?.field).toBe('lanes');
    expect(after.length).toBeLessThanOrEqual(changeValueCharsMax);
    expect(after).toMatch(/… \[cut: [\d,]+ of [\d,]+ characters not shown; the whole value is in the file\]$/);
    expect(() => configFieldChangeSchema.parse(change?.fields[0])).not.toThrow();
  });

  it('against the empty configuration (an untrusted run shows the whole file), a default the file never names is no change', () => {
    const whole = diffConfigs(emptyConfig(), config('routes:', ...route()));
    expect(whole.settings).toEqual([]);
    expect(whole.routes.map((r) => r.change)).toEqual(['added']);
  });

  it('still shows the operator opt-out a file turns on, against the empty configuration and against a file without it', () => {
    const optOut = config('operator:', '  unattended_decisions: true');
    const expected = [
      {
        name: 'operator',
        change: 'changed',
        fields: [{ field: 'unattended_decisions', before: 'false', after: 'true' }],
      },
    ];
    expect(diffConfigs(emptyConfig(), optOut).settings).toEqual(expected);
    expect(diffConfigs(config(), optOut).settings).toEqual(expected);
  });
});

describe('an SSH command rule with a * on the card', () => {
  const host = (...commands: string[]) => [
    'ssh_hosts:',
    '  - name: web',
    '    host: 10.0.0.5',
    '    user: deploy',
    '    credential: k',
    '    host_key: accept_new',
    '    approval: none',
    '    commands:',
    ...commands,
  ];

  it('carries a note saying what its * matches, strict or loose; an exact rule, a removed rule and other fields carry none', () => {
    const before = config(...host("      - { command: 'uptime' }", "      - { command: 'old *' }"));
    const after = config(
      ...host(
        "      - { command: 'uptime -p' }",
        "      - { command: 'echo *' }",
        "      - { command: 'tar *', rules_may_loosen: true }",
      ),
      '    port: 2222',
    );
    const fields = diffConfigs(before, after).ssh_hosts[0]?.fields ?? [];
    expect(fields.map((f) => [f.field, f.note])).toEqual([
      ['port', undefined],
      ['commands[0]', undefined],
      ['commands[1]', sshCommandStarNotes.strict],
      ['commands[2]', sshCommandStarNotes.loose],
    ]);
    for (const field of fields) expect(() => configFieldChangeSchema.parse(field)).not.toThrow();
    const removed = diffConfigs(after, before).ssh_hosts[0]?.fields ?? [];
    expect(removed.find((f) => f.field === 'commands[2]')).toMatchObject({ after: null });
    expect(removed.find((f) => f.field === 'commands[2]')?.note).toBeUndefined();
  });
});

describe("compareFieldNames: the order of a card's fields, without ICU", () => {
  it('orders an index by its value: rules[2] before rules[10], a name before its elements', () => {
    const names = ['rules[10]', 'rules[2]', 'headers.b', 'rules', 'headers.A', 'rules[1]', 'headers.a'];
    expect([...names].sort(compareFieldNames)).toEqual([
      'headers.a',
      'headers.A',
      'headers.b',
      'rules',
      'rules[1]',
      'rules[2]',
      'rules[10]',
    ]);
  });

  it("orders field names as localeCompare('en', numeric) did: letters, indices, keys, _ - . and digits", () => {
    // Few characters, so two names often share a start and differ in case, a digit run's value or a symbol.
    const name = fc
      .array(fc.constantFrom('a', 'A', 'b', 'B', 'x', '_', '-', '.', '[', ']', '0', '1', '2', '9', '10'), {
        minLength: 1,
        maxLength: 7,
      })
      .map((chars) => chars.join(''));
    const realistic = fc.constantFrom(
      'env.DB_HOST',
      'env.DB1_HOST',
      'env.API_TOKEN',
      'env.API2_TOKEN',
      'headers.X-Api-Key',
      'headers.X_Api_Key',
      'query.a_b',
      'query.a-b',
      'tools[1]',
      'tools_x',
      'rules[2]',
      'rules[10]',
      'base_url',
      'reads_bypass_lanes',
    );
    fc.assert(
      fc.property(fc.oneof(name, realistic), fc.oneof(name, realistic), (x, y) => {
        expect(Math.sign(compareFieldNames(x, y))).toBe(Math.sign(x.localeCompare(y, 'en', { numeric: true })));
        expect(Math.sign(compareFieldNames(y, x))).toBe(-Math.sign(compareFieldNames(x, y)) || 0);
      }),
      // Always tried, whatever the seed: leading zeros, which ICU ignores at every level, beside a difference of case
      // (a random run found `2` / `02` once in ~1,400 pairs).
      {
        numRuns: 3000,
        examples: [
          ['2', '02'],
          ['2a', '02A'],
          ['02a', '2A'],
          ['rules[02]', 'rules[2]'],
          ['a00', 'a0'],
        ],
      },
    );
  });
});
