import { describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import { globMatches, sshCommandPolicy } from './ssh-command-policy.js';

const config = parseConfig(`version: 1
ssh_hosts:
  - name: web
    host: web.example
    user: deploy
    credential: k
    host_key: accept_new
    approval: per_call
    commands:
      - command: 'systemctl status *'
        lane: reads
        approval: none
      - command: 'deploy *'
        lane: deploy
`);
const web = config.sshHosts.get('web');

describe('when a command is matched against the host entry', () => {
  it.each([
    ['systemctl status nginx', 'reads', 'none'],
    ['deploy v1.2', 'deploy', 'per_call'],
    ['rm -rf /', 'host:web', 'per_call'],
    ['systemctl status', 'host:web', 'per_call'],
  ])('%s → lane %s, approval %s', (command, lane, approval) => {
    expect(web).toBeDefined();
    if (web !== undefined) expect(sshCommandPolicy(web, command)).toEqual({ lane, approval });
  });

  it.each([
    ['a*c', 'abc', true],
    ['a*c', 'a\nc', true],
    ['a.c', 'abc', false],
    ['*', '', true],
    ['ls (x)', 'ls (x)', true],
    ['ls', 'ls -la', false],
  ])('glob %j against %j → %s (regex characters are literal)', (pattern, text, expected) => {
    expect(globMatches(pattern, text)).toBe(expected);
  });
});

describe('when the ssh_hosts section is invalid', () => {
  const refusal = (yaml: string): unknown => {
    try {
      parseConfig(yaml);
      return undefined;
    } catch (error) {
      return error;
    }
  };
  const entry = (extra: string) =>
    `version: 1\nssh_hosts:\n  - name: a\n    host: h\n    user: u\n    credential: k\n${extra}`;
  it.each([
    [
      'a pin not in ssh-keygen form',
      entry('    host_key: {pinned: [sha256:abc]}\n'),
      'ssh_hosts[0].host_key.pinned[0]',
    ],
    ['no host key policy', entry(''), 'ssh_hosts[0].host_key'],
    ['a port out of range', entry('    host_key: accept_new\n    port: 70000\n'), 'ssh_hosts[0].port'],
    [
      'a duplicate name',
      `${entry('    host_key: accept_new\n')}  - name: a\n    host: h2\n    user: u\n    credential: k\n    host_key: accept_new\n`,
      'ssh_hosts[1].name',
    ],
  ])('%s → CONFIG_INVALID naming the field', (_label, yaml, field) => {
    expect(refusal(yaml)).toMatchObject({ code: 'CONFIG_INVALID', field });
  });
});
