import { describe, expect, it } from 'vitest';
import {
  allowlistInjectionVariables,
  allowlistWithheld,
  listeningTcpInodes,
  socketInode,
} from './process-injection.js';

const untraced = 'Name:\tagent\nState:\tS (sleeping)\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\n';
const environ = (...entries: string[]): string => `${['HOME=/home/a', 'PATH=/usr/bin', ...entries].join('\0')}\0`;
/** A value that must never reach a reason. */
const secretish = '/tmp/palw-secret-path-7f3a.so';

describe('when the allowlist reads a process started with a loader or runtime injection variable', () => {
  it.each([
    ['LD_PRELOAD', `LD_PRELOAD=${secretish}`, 'LD_PRELOAD set'],
    ['LD_LIBRARY_PATH', `LD_LIBRARY_PATH=${secretish}`, 'LD_LIBRARY_PATH set'],
    ['LD_AUDIT', `LD_AUDIT=${secretish}`, 'LD_AUDIT set'],
    ['an empty LD_PRELOAD (set is set)', 'LD_PRELOAD=', 'LD_PRELOAD set'],
    ['PYTHONSTARTUP', `PYTHONSTARTUP=${secretish}`, 'PYTHONSTARTUP set'],
    ['PYTHONPATH', `PYTHONPATH=${secretish}`, 'PYTHONPATH set'],
    ['PERL5OPT', `PERL5OPT=-M${secretish}`, 'PERL5OPT set'],
    ['RUBYOPT', `RUBYOPT=-r${secretish}`, 'RUBYOPT set'],
    ['NODE_OPTIONS --require=', `NODE_OPTIONS=--require=${secretish}`, 'NODE_OPTIONS sets --require'],
    [
      'NODE_OPTIONS --require FILE',
      `NODE_OPTIONS=--max-old-space-size=64 --require ${secretish}`,
      'NODE_OPTIONS sets --require',
    ],
    ['NODE_OPTIONS -r', `NODE_OPTIONS=-r ${secretish}`, 'NODE_OPTIONS sets -r'],
    ['NODE_OPTIONS --import', `NODE_OPTIONS=--import=${secretish}`, 'NODE_OPTIONS sets --import'],
    ['NODE_OPTIONS --loader', `NODE_OPTIONS=--loader ${secretish}`, 'NODE_OPTIONS sets --loader'],
    [
      'NODE_OPTIONS --experimental_loader',
      `NODE_OPTIONS=--experimental_loader=${secretish}`,
      'NODE_OPTIONS sets --experimental-loader',
    ],
    ['NODE_OPTIONS quoted', `NODE_OPTIONS="--require" "${secretish}"`, 'NODE_OPTIONS sets --require'],
    ['NODE_OPTIONS --inspect-port', 'NODE_OPTIONS=--inspect-port=0', 'NODE_OPTIONS sets --inspect'],
    ['NODE_OPTIONS --inspect-brk', 'NODE_OPTIONS=--inspect-brk', 'NODE_OPTIONS sets --inspect'],
    // Node's parser reads a backslash inside quotes as an escape: `--re\quire` is --require to node.
    [
      'NODE_OPTIONS with an escaped option name',
      `NODE_OPTIONS="--re\\quire=${secretish}"`,
      'NODE_OPTIONS sets an option not known to be harmless',
    ],
    [
      'NODE_OPTIONS --openssl-config (loads a provider library)',
      `NODE_OPTIONS=--openssl-config=${secretish}`,
      'NODE_OPTIONS sets an option not known to be harmless',
    ],
    [
      'NODE_OPTIONS with an option of a later node',
      `NODE_OPTIONS=--max-old-space-size=64 --env-file=${secretish}`,
      'NODE_OPTIONS sets an option not known to be harmless',
    ],
    ['ELECTRON_RUN_AS_NODE', 'ELECTRON_RUN_AS_NODE=1', 'ELECTRON_RUN_AS_NODE set'],
    ['NODE_PATH', `NODE_PATH=${secretish}`, 'NODE_PATH set'],
    ['OPENSSL_CONF', `OPENSSL_CONF=${secretish}`, 'OPENSSL_CONF set'],
    ['OPENSSL_MODULES', `OPENSSL_MODULES=${secretish}`, 'OPENSSL_MODULES set'],
    ['GCONV_PATH', `GCONV_PATH=${secretish}`, 'GCONV_PATH set'],
    ['PYTHONHOME', `PYTHONHOME=${secretish}`, 'PYTHONHOME set'],
    ['PYTHONUSERBASE', `PYTHONUSERBASE=${secretish}`, 'PYTHONUSERBASE set'],
    ['PERL5LIB', `PERL5LIB=${secretish}`, 'PERL5LIB set'],
    ['RUBYLIB', `RUBYLIB=${secretish}`, 'RUBYLIB set'],
  ])('%s withholds it, naming the variable and never its value', (_case, entry, reason) => {
    const why = allowlistWithheld(environ(entry), untraced);
    expect(why).toBe(reason);
    expect(why).not.toContain('palw-secret');
  });

  it('harmless NODE_OPTIONS, look-alike names and a variable named only inside a value do not', () => {
    const entries = [
      'NODE_OPTIONS=--max-old-space-size=4096 --enable-source-maps --title my-agent --no_warnings',
      'MY_LD_PRELOAD=/x.so',
      'LD_PRELOADX=/x.so',
      'NOTE=LD_PRELOAD=/x.so',
      'PYTHONUNBUFFERED=1',
      'LD_BIND_NOW=1',
    ];
    expect(allowlistWithheld(environ(...entries), untraced)).toBeUndefined();
    expect(allowlistWithheld(environ(), untraced)).toBeUndefined();
  });

  it('keeps one named list with a reason for each variable', () => {
    for (const name of ['LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_AUDIT', 'NODE_OPTIONS', 'PYTHONSTARTUP', 'PYTHONPATH']) {
      expect(allowlistInjectionVariables[name]?.why).toMatch(/\w/);
    }
    // Names of the object's prototype are not in the list.
    expect(allowlistWithheld(environ('toString=x', 'constructor=y', '__proto__=z'), untraced)).toBeUndefined();
  });
});

describe('when the allowlist reads a traced process', () => {
  it('a tracer (TracerPid not 0) withholds it; a status without TracerPid fails closed', () => {
    expect(allowlistWithheld(environ(), untraced.replace('TracerPid:\t0', 'TracerPid:\t4242'))).toBe(
      'the process is being traced (ptrace)',
    );
    expect(allowlistWithheld(environ(), 'Name:\tagent\n')).toBe('its tracing state could not be read');
    expect(allowlistWithheld(environ(), '')).toBe('its tracing state could not be read');
  });
});

describe('when the allowlist reads which sockets a process listens on', () => {
  // Rows as this machine's kernel prints them: node's inspector (LISTEN, 127.0.0.1:9229), a connection, and a v6
  // listener on [::]:8080.
  const header = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
  const tcp = [
    header,
    '   0: 0100007F:240D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2355932 1 00000000e588d685 100 0 0 10 0',
    '   1: 0100007F:A6EF 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 2358892 1 0000000000000000 20 4 30 10 -1',
    '',
  ].join('\n');
  const tcp6 = [
    header,
    '   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 31337 1 0000000000000000 100 0 0 10 0',
    '',
  ].join('\n');

  it('the LISTEN rows of tcp and tcp6 give their inodes; other states do not', () => {
    expect(listeningTcpInodes(tcp)).toEqual(new Set(['2355932']));
    expect(listeningTcpInodes(tcp6)).toEqual(new Set(['31337']));
    expect(listeningTcpInodes(`${header}\n`)).toEqual(new Set());
  });

  it('a text that is not such a table, or a short row, is undefined (the caller fails closed)', () => {
    for (const text of [
      '',
      'garbage\n',
      `${header}\n   0: 0100007F:240D 00000000:0000 0A\n`,
      tcp.replace(' 0A ', ' listen '),
    ])
      expect(listeningTcpInodes(text)).toBeUndefined();
  });

  it('only a socket link names an inode', () => {
    expect(socketInode('socket:[2355932]')).toBe('2355932');
    for (const link of ['pipe:[2355909]', 'anon_inode:[eventfd]', '/tmp/socket:[1]', 'socket:[]'])
      expect(socketInode(link)).toBeUndefined();
  });
});
