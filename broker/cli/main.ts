import { refuseInspectorSignal, refuseOpenInspector } from '../host/inspector-guard.js';
import { processIo } from './cli-io.js';
import { runCli } from './program.js';

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
// so pending output is flushed; a daemon resolves only after its graceful shutdown.
process.exitCode = await runCli(process.argv.slice(2), process.env, processIo(process.env));
