import { defineConfig } from 'vitest/config';

// Unit and integration tests (real SQLite files, real sockets on loopback). The Playwright e2e
// suite has its own config (e2e/vitest.config.ts) because it needs a built renderer and a browser.
export default defineConfig({
  test: {
    include: ['broker/**/*.test.ts', 'renderer/**/*.test.ts', 'app/**/*.test.ts', 'tests/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
