#!/usr/bin/env node
// The `postern` command. It runs the TypeScript sources directly through tsx, so a checkout needs
// no build step for the CLI (the renderer and desktop bundles are built by `npm run build`).
// tsx is told which tsconfig to use: by default it reads the one in the CURRENT directory, which
// for an installed `postern` started by an MCP client is some other project's, whose settings
// (decorators, class fields, JSX) must not change how Postern's own code is compiled.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register({ tsconfig: fileURLToPath(new URL('../tsconfig.base.json', import.meta.url)) });
await import('../broker/cli/main.ts');
