/**
 * The command an argv names (without node and the script): its first word that is not an option, past `--data-dir DIR`
 * or `--data-dir=DIR` (the one option the program takes before its command). Undefined for anything else before it
 * (`--help`, an unknown option) or no command at all: the full program answers those. main.ts reads it to load only what
 * the command needs, so it imports nothing.
 */
export function commandOf(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--data-dir') i += 1;
    else if (!arg.startsWith('--data-dir=')) return arg.startsWith('-') ? undefined : arg;
  }
  return undefined;
}
