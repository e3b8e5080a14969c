/**
 * Everything the commands write goes through here, so the output contract is in one place:
 * - `out`: lines for the operator on stdout. The operator URL (with its token) is printed exactly
 *   once, by runHeadless; nothing else may print the token.
 * - `err`: diagnostics on stderr.
 * - `event`: machine-readable lines `{"event":…}` on stdout, only when POSTERN_TEST_EVENTS=1, for
 *   tests and supervisors to wait on instead of sleeping. Events never carry the token.
 */
export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  event(event: { event: string } & Record<string, unknown>): void;
}

export function processIo(env: Readonly<Record<string, string | undefined>>): CliIo {
  const eventsOn = env['POSTERN_TEST_EVENTS'] === '1';
  return {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    event: (event) => {
      if (eventsOn) process.stdout.write(`${JSON.stringify(event)}\n`);
    },
  };
}
