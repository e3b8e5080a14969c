import { refuseInspectorSignal, refuseOpenInspector } from '../host/inspector-guard.js';
import { packageVersion } from '../host/package-root.js';
import { processIo } from './cli-io.js';
import { commandOf } from './command-of.js';

// `postern … | head -1`: a reader that stops early is the operator's choice, not a failure worth a
// stack trace. Later writes are dropped and the command finishes with its own exit code (a daemon
// keeps serving; the MCP relay watches its stdout itself).
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') return;
  process.stderr.write(`postern: INTERNAL stdout: ${error.message}\n`);
  process.exitCode = 1;
});

// No debugger door into a Postern process (broker/host/inspector-guard.ts): SIGUSR1 is refused from here
// on, and a process started with its inspector open (--inspect) closes it and runs nothing.
refuseInspectorSignal();
try {
  refuseOpenInspector('run');
} catch (error) {
  const refusal = error as { code: string; message: string };
  process.stderr.write(`postern: ${refusal.code} ${refusal.message}\n`);
  process.exit(2);
}

// The `postern` entry (bin/postern.mjs runs its bundle, or this file through tsx). The exit code is set, not forced,
// so pending output is flushed; a daemon resolves only after its graceful shutdown. What a command needs loads only
// once the command is known (the CLI bundle splits at each dynamic import): `--version` alone answers from
// package.json; `mcp` (the shim an MCP client launches, and waits for) runs without the other commands' modules or the
// contract's schemas, and `status` loads the journal or the operator client only when there is one to read or ask
// (issue 18: cold start).
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  process.stdout.write(`${packageVersion()}\n`);
} else if (commandOf(argv) === 'mcp') {
  const { runMcpCli } = await import('./mcp-main.js');
  process.exitCode = await runMcpCli(argv, process.env, processIo(process.env));
} else if (commandOf(argv) === 'status') {
  const { runStatusCli } = await import('./status-main.js');
  process.exitCode = await runStatusCli(argv, process.env, processIo(process.env));
} else {
  const { runCli } = await import('./program.js');
  process.exitCode = await runCli(argv, process.env, processIo(process.env));
}
