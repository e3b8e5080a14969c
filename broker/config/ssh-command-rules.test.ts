import { describe, expect, it } from 'vitest';
import { configEntryChangeSchema } from '../contract/index.js';
import { diffConfigs, sshCommandStarNotes } from './config-diff.js';
import { parseConfig } from './load-config.js';
import { configRefusal as refusal } from '../testing/config-refusal.js';

/** One SSH host entry, per_call unless the case says otherwise, with the case's lines added. */
const host = (extra: string[]): string =>
  [
    'version: 1',
    'ssh_hosts:',
    '  - name: web',
    '    host: web.example',
    '    user: deploy',
    '    credential: deploy-key',
    '    host_key: accept_new',
    ...extra,
    '',
  ].join('\n');

const statusReads = ["      - { command: 'systemctl status *', lane: reads, approval: none }"];

describe('when an SSH host declares commands[] rules', () => {
  it('loads a rule looser than the host only with rules_may_loosen: true', () => {
    const web = parseConfig(
      host(['    approval: per_call', '    rules_may_loosen: true', '    commands:', ...statusReads]),
    ).sshHosts.get('web');
    expect(web?.rules_may_loosen).toBe(true);
    expect(web?.commands).toEqual([{ command: 'systemctl status *', lane: 'reads', approval: 'none' }]);
  });

  it('allows a rule equal to or stricter than its host, or one that sets only a lane, without rules_may_loosen', () => {
    const web = parseConfig(
      host([
        '    approval: session',
        '    commands:',
        "      - { command: 'deploy *', approval: per_call }",
        "      - { command: 'uptime', approval: session }",
        "      - { command: 'df -h', lane: reads }",
      ]),
    ).sshHosts.get('web');
    expect(web?.commands.map((r) => r.approval)).toEqual(['per_call', 'session', undefined]);
  });

  it('loads rules_may_loosen on a rule (its * keeps the older meaning); it does not let the rule ask less', () => {
    const web = parseConfig(
      host([
        '    approval: session',
        '    commands:',
        "      - { command: 'legacy-report *', approval: per_call, rules_may_loosen: true }",
      ]),
    ).sshHosts.get('web');
    expect(web?.commands).toEqual([{ command: 'legacy-report *', approval: 'per_call', rules_may_loosen: true }]);
    const r = refusal(
      host([
        '    approval: per_call',
        '    commands:',
        "      - { command: 'x *', approval: none, rules_may_loosen: true }",
      ]),
    );
    expect(r).toMatchObject({ code: 'CONFIG_INVALID', field: 'ssh_hosts[0].commands[0].approval' });
  });

  it('leaves a host without the switch as before (no rules_may_loosen field)', () => {
    expect(parseConfig(host([])).sshHosts.get('web')).not.toHaveProperty('rules_may_loosen');
  });
});

describe('when a command rule asks less than its host the configuration is refused naming the rule field', () => {
  it.each<[string, string[], string, string]>([
    [
      'a none rule on a per_call host without rules_may_loosen',
      ['    approval: per_call', '    commands:', ...statusReads],
      'ssh_hosts[0].commands[0].approval',
      "none is looser than the host's approval per_call; set rules_may_loosen: true on the host to allow it",
    ],
    [
      'a none rule on a host whose approval is the default per_call',
      ['    commands:', ...statusReads],
      'ssh_hosts[0].commands[0].approval',
      'rules_may_loosen',
    ],
    [
      'a session rule on a per_call host (the third rule)',
      [
        '    approval: per_call',
        '    commands:',
        "      - { command: 'deploy *', approval: per_call }",
        "      - { command: 'df -h', lane: reads }",
        "      - { command: 'uptime', approval: session }",
      ],
      'ssh_hosts[0].commands[2].approval',
      "session is looser than the host's approval per_call",
    ],
    [
      'a none rule on a session host, rules_may_loosen: false',
      ['    approval: session', '    rules_may_loosen: false', '    commands:', ...statusReads],
      'ssh_hosts[0].commands[0].approval',
      'looser',
    ],
  ])('%s', (_when, extra, field, words) => {
    const r = refusal(host(extra));
    expect(r.code).toBe('CONFIG_INVALID');
    expect(r.field).toBe(field);
    expect(r.message).toContain(`${field}:`);
    expect(r.message).toContain(words);
  });
});

describe('the pending-change card shows the loosening switch of a host', () => {
  it('as its own field', () => {
    const before = parseConfig(host(['    approval: per_call']));
    const after = parseConfig(host(['    approval: per_call', '    rules_may_loosen: true']));
    expect(diffConfigs(before, after).ssh_hosts).toEqual([
      { name: 'web', change: 'changed', fields: [{ field: 'rules_may_loosen', before: null, after: 'true' }] },
    ]);
  });
});

describe('the pending-change card shows every command rule of a host whole', () => {
  const rules = (lines: string[]) =>
    host(['    approval: per_call', '    rules_may_loosen: true', '    commands:', ...lines]);
  const reads = Array.from(
    { length: 12 },
    (_, i) => `      - { command: 'cat /var/log/app-${i}/current-${'x'.repeat(20)}.log', lane: reads, approval: none }`,
  );

  it('a rule added behind a dozen others is its own line, whole (it once hid past a 400-character cut)', () => {
    const added = "      - { command: '*', lane: reads, approval: none, rules_may_loosen: true }";
    const [change] = diffConfigs(parseConfig(rules(reads)), parseConfig(rules([...reads, added]))).ssh_hosts;
    expect(change?.fields).toEqual([
      {
        field: 'commands[12]',
        before: null,
        after: JSON.stringify({ command: '*', lane: 'reads', approval: 'none', rules_may_loosen: true }),
        // What its * really matches, said where the person accepts it (config pending).
        note: sshCommandStarNotes.loose,
      },
    ]);
  });

  it('a host added with its rules lists each rule whole, the longest a rule may be included', () => {
    const longest = `deploy ${'a'.repeat(1010)} *`;
    const lane = 'l'.repeat(200);
    const lines = [...reads, `      - { command: '${longest}', lane: ${lane}, approval: per_call }`];
    const [change] = diffConfigs(parseConfig('version: 1\n'), parseConfig(rules(lines))).ssh_hosts;
    const shown = change?.fields.filter((f) => f.field.startsWith('commands[')) ?? [];
    expect(shown).toHaveLength(13);
    expect(shown.map((f) => (f.after === null ? null : (JSON.parse(f.after) as { command: string }).command))).toEqual([
      ...Array.from({ length: 12 }, (_, i) => `cat /var/log/app-${i}/current-${'x'.repeat(20)}.log`),
      longest,
    ]);
    for (const f of change?.fields ?? []) expect(f.after ?? '').not.toContain('[cut:');
  });

  it('a host with 256 rules fits the card’s bounds', () => {
    const many = Array.from({ length: 256 }, (_, i) => `      - { command: 'status ${i} *', approval: per_call }`);
    const [change] = diffConfigs(parseConfig('version: 1\n'), parseConfig(rules(many))).ssh_hosts;
    expect(change?.fields.filter((f) => f.field.startsWith('commands['))).toHaveLength(256);
    expect(() => configEntryChangeSchema.parse(change)).not.toThrow();
  });
});
