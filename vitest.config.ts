import { defineConfig } from 'vitest/config';

// Unit and integration tests (real SQLite files, real sockets on loopback). The Playwright e2e
// suite has its own config (e2e/vitest.config.ts) because it needs a built renderer and a browser.
export default defineConfig({
  test: {
    include: ['broker/**/*.test.ts', 'renderer/**/*.test.ts', 'app/**/*.test.ts', 'tests/**/*.test.ts'],
    pool: 'forks',
    // The daemons tests start write their integrity anchors into a directory of this run's own, never into the
    // user's ~/.local/state, removed when the run ends (POSTERN_ANCHOR_DIR, set by the global setup).
    globalSetup: ['broker/testing/anchor-dir.global-setup.ts'],
    // Every event the tests make is checked both ways: by the schemas, and by the shapes production trusts
    // (broker/journal/validate-new-event.ts, EventChecks); a disagreement fails the test that made the event.
    env: { POSTERN_EVENT_CHECKS: 'both' },
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
