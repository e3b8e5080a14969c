import { processIo } from './cli-io.js';
import { runCli } from './program.js';

// The `postern` entry (bin/postern.mjs loads this through tsx). The exit code is set, not forced,
// so pending output is flushed; a daemon resolves only after its graceful shutdown.
process.exitCode = await runCli(process.argv.slice(2), process.env, processIo(process.env));
