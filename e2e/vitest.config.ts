import { defineConfig } from 'vitest/config';

// End-to-end: the real headless daemon (node bin/postern.mjs daemon) driven through Debian's
// chromium with playwright-core. Needs the built renderer (dist/renderer); `npm run test:e2e` and
// `npm test` build it first.
export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    pool: 'forks',
    // The daemons tests start write their integrity anchors into a directory of this run's own, never into the
    // user's ~/.local/state, removed when the run ends (POSTERN_ANCHOR_DIR, set by the global setup).
    globalSetup: ['broker/testing/anchor-dir.global-setup.ts'],
    // The daemons check every event both ways (broker/journal/validate-new-event.ts, EventChecks), as the unit suite does.
    env: { POSTERN_EVENT_CHECKS: 'both' },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
