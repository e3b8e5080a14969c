import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

/**
 * The same policy the headless host sends as a header, as a meta tag in the built page, so it also
 * holds in Electron where the page is loaded from a file. (frame-ancestors is header-only; the host
 * sends it.) Build only: the dev server injects an inline script that this policy would block.
 */
const builtPageCsp = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'";

function contentSecurityPolicyMeta(): Plugin {
  return {
    name: 'postern-csp-meta',
    apply: 'build',
    transformIndexHtml: () => [
      {
        tag: 'meta',
        attrs: { 'http-equiv': 'Content-Security-Policy', content: builtPageCsp },
        injectTo: 'head-prepend',
      },
    ],
  };
}

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs work both from the host at / and from file:// in Electron.
  base: './',
  plugins: [react(), contentSecurityPolicyMeta()],
  build: {
    outDir: fileURLToPath(new URL('../dist/renderer', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
  },
});
