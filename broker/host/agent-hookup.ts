import path from 'node:path';
import type { AgentHookup } from '../contract/index.js';
import { agentHookups } from '../core/agent-hookup.js';
import { packageRoot } from './package-root.js';

/**
 * The hookup lines for this running broker (`agent.hookup`), built by the same function as `postern
 * agent-config`: this installation's bin and the broker's own data directory, always spelled out (the
 * client starts the shim with its own environment). Under Electron process.execPath is the app, not a
 * node that runs the shim, so the lines name `node` on the PATH and say so.
 */
export function thisBrokerHookups(dataDir: string): AgentHookup {
  const bin = path.join(packageRoot, 'bin', 'postern.mjs');
  const underElectron = typeof process.versions['electron'] === 'string';
  const node = underElectron ? 'node' : process.execPath;
  const note = underElectron
    ? 'These lines run the shim with the `node` on your PATH (Node 20 or newer); the desktop app brings no node of its own.'
    : null;
  return agentHookups({ node, bin, dataDir: path.resolve(dataDir) }, note);
}
