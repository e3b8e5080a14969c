import Database from 'better-sqlite3';

/**
 * Another process's edit of one session's row in a journal file, through its own connection (THREAT-MODEL 3: any
 * process of the user can write the file, and does so while no broker runs): `change` is given the row's state JSON
 * and returns the new one, which is written with the columns beside it (status, pid, start time).
 */
export function editSessionRow(
  path: string,
  sessionId: string,
  change: (state: Record<string, unknown>) => Record<string, unknown>,
): void {
  const file = new Database(path, { timeout: 5_000 });
  try {
    const row = file.prepare('SELECT state FROM sessions WHERE session_id = ?').get(sessionId) as
      { state: string } | undefined;
    if (row === undefined) throw new Error(`no sessions row for ${sessionId}`);
    const state = change(JSON.parse(row.state) as Record<string, unknown>);
    file
      .prepare('UPDATE sessions SET status = ?, pid = ?, start_time = ?, state = ? WHERE session_id = ?')
      .run(state['status'], state['pid'], state['start_time'], JSON.stringify(state), sessionId);
  } finally {
    file.close();
  }
}
