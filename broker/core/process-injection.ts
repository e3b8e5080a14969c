/**
 * The environment variables that make a hashed, trusted executable run someone else's code, and why each one does. A
 * process that started with any of them set does not get the process allowlist's skip (docs/queue.md, "Process
 * allowlist"): its session gets the card, like a process no entry names. Every variable is checked whatever the
 * allowlisted binary is: the broker cannot tell reliably which runtime an executable embeds (a renamed copy of node or
 * python, a single-executable app, an Electron app honouring NODE_OPTIONS), and a card too many is the safe side.
 * `flags`: the variable counts only when one of these options is in it (NODE_OPTIONS also carries harmless settings
 * such as --max-old-space-size).
 */
export const allowlistInjectionVariables: Readonly<Record<string, InjectionVariable>> = {
  LD_PRELOAD: { why: "the dynamic loader maps these libraries into the process before the executable's own code" },
  LD_LIBRARY_PATH: { why: 'the loader looks here first for the libraries the executable needs: a planted libc runs' },
  LD_AUDIT: { why: "the loader runs these audit libraries' code inside the process" },
  GCONV_PATH: { why: "glibc's iconv loads its conversion modules (shared objects) from here" },
  NODE_OPTIONS: {
    why: 'node (and Electron) loads modules, an OpenSSL config naming a provider library, or opens a debugger',
    flags: ['-r', '--require', '--import', '--loader', '--experimental-loader', '--inspect'],
  },
  NODE_PATH: { why: "node resolves bare module names here too: a planted module shadows the agent's" },
  ELECTRON_RUN_AS_NODE: { why: "an Electron app runs as plain node: its first argument is any script, not the app's" },
  OPENSSL_CONF: {
    why: 'OpenSSL (in node, python, curl…) reads this config, which can load a provider or engine library',
  },
  OPENSSL_MODULES: { why: 'OpenSSL loads its provider libraries from here' },
  OPENSSL_ENGINES: { why: 'OpenSSL loads its engine libraries from here' },
  PYTHONSTARTUP: { why: 'python runs this file first in interactive mode' },
  PYTHONPATH: { why: "python imports modules from here before its own: a planted module shadows the agent's" },
  PYTHONHOME: { why: 'python takes its whole standard library from here' },
  PYTHONUSERBASE: { why: "python's user site-packages: a .pth file there runs import lines at start" },
  PERL5OPT: { why: 'perl takes these as command-line switches (-M loads a module)' },
  PERL5LIB: { why: "perl loads modules from here first: a planted module shadows the agent's" },
  PERLLIB: { why: "perl loads modules from here first (when PERL5LIB is unset): a planted module shadows the agent's" },
  RUBYOPT: { why: 'ruby takes these as command-line options (-r requires a library)' },
  RUBYLIB: { why: "ruby loads libraries from here first: a planted library shadows the agent's" },
};

/**
 * NODE_OPTIONS settings that change nothing about which code runs: any other option, or a value node's own parser
 * would read differently from a plain split (a backslash escape inside quotes), withholds the allowlist too, since
 * node keeps adding options that load code (`--openssl-config`, `--env-file`, `--experimental-*`).
 */
const harmlessNodeOptions: readonly string[] = [
  '--max-old-space-size',
  '--max-semi-space-size',
  '--enable-source-maps',
  '--no-warnings',
  '--trace-warnings',
  '--no-deprecation',
  '--trace-deprecation',
  '--unhandled-rejections',
  '--dns-result-order',
  '--use-openssl-ca',
  '--use-bundled-ca',
  '--title',
];

export interface InjectionVariable {
  /** What the variable makes the process do: why a process started with it is not the executable that was hashed. */
  readonly why: string;
  readonly flags?: readonly string[];
}

/**
 * Why the allowlist must not apply to a process, from its /proc/<pid>/environ (its initial environment: NUL-separated
 * `NAME=value`) and /proc/<pid>/status; undefined: neither says so. A tracer (TracerPid not 0: gdb, strace, any
 * ptrace attach) can rewrite the process's code. A status without a readable TracerPid line is refused too. The reason
 * names a variable or an option from allowlistInjectionVariables, never a value from the process.
 */
export function allowlistWithheld(environ: string, status: string): string | undefined {
  const tracer = /^TracerPid:\s*(\d+)\s*$/m.exec(status);
  if (tracer === null) return 'its tracing state could not be read';
  if (tracer[1] !== '0') return 'the process is being traced (ptrace)';
  for (const entry of environ.split('\0')) {
    const equals = entry.indexOf('=');
    if (equals <= 0) continue;
    const name = entry.slice(0, equals);
    const variable = Object.hasOwn(allowlistInjectionVariables, name) ? allowlistInjectionVariables[name] : undefined;
    if (variable === undefined) continue;
    if (variable.flags === undefined) return `${name} set`;
    const value = entry.slice(equals + 1);
    const flag = optionIn(value, variable.flags);
    if (flag !== undefined) return `${name} sets ${flag}`;
    // The option's own name is the process's text: the reason says only that one is not known to be harmless.
    if (!onlyHarmless(value)) return `${name} sets an option not known to be harmless`;
  }
  return undefined;
}

/**
 * The first of `flags` among the options of a NODE_OPTIONS-like value: `--flag`, `--flag=value`, quoted or not, with
 * underscores read as dashes (node accepts both) and `--inspect-port`-like suffixes of a flag counted as the flag.
 */
function optionIn(value: string, flags: readonly string[]): string | undefined {
  for (const raw of value.split(/\s+/)) {
    const token = raw.replace(/["']/g, '');
    if (!token.startsWith('-')) continue;
    const name = (token.split('=')[0] ?? '').replace(/_/g, '-');
    const found = flags.find((flag) => name === flag || (flag.startsWith('--') && name.startsWith(`${flag}-`)));
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Every option of a NODE_OPTIONS value is one of harmlessNodeOptions (with its value), and nothing is escaped. */
function onlyHarmless(value: string): boolean {
  if (value.includes('\\')) return false;
  let expectsValue = false;
  for (const raw of value.split(/\s+/)) {
    const token = raw.replace(/["']/g, '');
    if (token === '') continue;
    if (!token.startsWith('-')) {
      // A bare word is the value of the option before it (`--title agent`), never an option of its own.
      if (!expectsValue) return false;
      expectsValue = false;
      continue;
    }
    const [name = '', given] = token.split('=');
    if (!harmlessNodeOptions.includes(name.replace(/_/g, '-'))) return false;
    expectsValue = given === undefined;
  }
  return true;
}

/**
 * Why the allowlist must not apply to a process that listens on a TCP port: node opens its inspector on a signal
 * (`kill -USR1`, Node 20 cannot turn it off) on 127.0.0.1:9229 or whichever port it was told, and whoever connects runs
 * code inside the process; debuggers of other runtimes (debugpy, a JVM's JDWP) listen the same way. The broker cannot
 * tell an inspector from the program's own server, so any TCP listener withholds it (a card too many is the safe side).
 */
export const tcpListenerWithheld = 'the process listens on a TCP port (an inspector or debugger may be open)';

/** The inode a /proc/<pid>/fd link names when the descriptor is a socket (`socket:[12345]`), else undefined. */
export function socketInode(link: string): string | undefined {
  return /^socket:\[(\d+)\]$/.exec(link)?.[1];
}

/** TCP_LISTEN in the `st` column of /proc/<pid>/net/tcp and tcp6 (include/net/tcp_states.h: 10). */
const tcpListenState = '0A';

/**
 * The inodes of the LISTEN sockets in a /proc/<pid>/net/tcp or /proc/<pid>/net/tcp6 table (a header line, then one row
 * per socket: `sl local rem st tx:rx tr:when retrnsmt uid timeout inode …`), or undefined when the text is not such a
 * table (the caller fails closed).
 */
export function listeningTcpInodes(table: string): ReadonlySet<string> | undefined {
  const [header = '', ...rows] = table.split('\n');
  const columns = header.trim().split(/\s+/);
  if (columns[0] !== 'sl' || !columns.includes('inode')) return undefined;
  const inodes = new Set<string>();
  for (const row of rows) {
    if (row.trim() === '') continue;
    const fields = row.trim().split(/\s+/);
    const [state, inode] = [fields[3], fields[9]];
    if (state === undefined || inode === undefined || !/^[0-9A-F]{2}$/.test(state) || !/^\d+$/.test(inode))
      return undefined;
    if (state === tcpListenState) inodes.add(inode);
  }
  return inodes;
}
