/** Shared by the crash driver (a child process entry point) and the test that kills it. */
export const crashActionId = 'act_crash_driver_0001';
