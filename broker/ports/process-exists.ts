/**
 * Whether some process has this pid (signal 0; EPERM: it exists, another user's). A reused pid answers true: callers
 * treat "exists" as "may still be using it" and leave what it may own.
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
