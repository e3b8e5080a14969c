/** Shared by the crash driver (a child process entry point) and the test that kills it. */
export const crashActionId = 'act_crash_driver_0001';
/** The crash driver's vault data key, so the test can read the killed run's sealed events. */
export const crashVaultKey = new Uint8Array(32).fill(7);
