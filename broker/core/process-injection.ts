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
  NODE_OPTIONS: {
    why: 'node (and Electron) loads modules or opens a debugger the executable never asked for',
    flags: ['-r', '--require', '--import', '--loader', '--experimental-loader', '--inspect'],
  },
  PYTHONSTARTUP: { why: 'python runs this file first in interactive mode' },
  PYTHONPATH: { why: "python imports modules from here before its own: a planted module shadows the agent's" },
  PERL5OPT: { why: 'perl takes these as command-line switches (-M loads a module)' },
  RUBYOPT: { why: 'ruby takes these as command-line options (-r requires a library)' },
};

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
    const flag = optionIn(entry.slice(equals + 1), variable.flags);
    if (flag !== undefined) return `${name} sets ${flag}`;
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
