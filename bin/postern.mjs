#!/usr/bin/env node
// The `postern` command. It runs the TypeScript sources directly through tsx, so a checkout needs
// no build step for the CLI (the renderer and desktop bundles are built by `npm run build`).
import { register } from 'tsx/esm/api';

register();
await import('../broker/cli/main.ts');
