import type { NewEvent } from '../contract/index.js';
import type { Journal } from '../journal/journal.js';
import type { ResultInput } from '../journal/result-store.js';
import { actionPaths } from './action-paths.js';

/** Appends an action (httpNoApproval) up to, not including, its RESULT_COMMITTED, which is returned. */
export async function appendUptoCommitted(journal: Journal, id: string): Promise<NewEvent> {
  const path = actionPaths.httpNoApproval(id);
  const at = path.findIndex((e) => e.kind === 'RESULT_COMMITTED');
  for (const event of path.slice(0, at)) await journal.append(event);
  const committed = path[at];
  if (committed === undefined) throw new Error('the path has no RESULT_COMMITTED');
  return committed;
}

/** A small result (`body of <actionId>`) for the ResultStore, named `resultId`. */
export function resultOf(actionId: string, resultId: string, attempt = 1): ResultInput {
  return {
    result_id: resultId,
    action_id: actionId,
    attempt,
    summary: { status: 200 },
    body: Buffer.from(`body of ${actionId}`),
    total_bytes: 16,
    truncated: false,
    digest: `sha256:${'cd'.repeat(32)}`,
    created_at_ms: 5,
  };
}
