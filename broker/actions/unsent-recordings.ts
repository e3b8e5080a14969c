import type { Logger } from 'pino';
import type { ActionState } from '../contract/index.js';
import type { Clock } from '../ports/index.js';
import { recordingIdOf, type Journal, type RecordingStore } from '../journal/index.js';
import { buildCast } from './ssh-recording.js';

/** Open recordings one pass of closeUnsentRecordings lists at a time (one short read). */
export const unsentRecordingsBatchMax = 500;

/**
 * The recording an SSH action has when its journal proves the exec request was never sent: settled not_attempted
 * with no DISPATCH_STARTED (the exec request is written only after that row is durable). The cast is the one the
 * executor seals on that path: the header and the mark that the exec request was never sent. Undefined for any other
 * action — a dispatched one, one still running, or an unknown one (a quarantined journal may have lost a later
 * DISPATCH_STARTED, so nothing is proven there): their open recording stays RECORDING_INCOMPLETE.
 */
export function unsentCast(state: ActionState | undefined): Buffer | undefined {
  if (state?.channel !== 'ssh' || state.outcome !== 'not_attempted' || state.dispatch_seq !== null) return undefined;
  // ACTION_ACCEPTED's target is `host:<entry> exec <digest>` (execute-ssh-action.ts; an entry name has no space).
  const hostName = /^host:([^ ]+) /.exec(state.target)?.[1] ?? '(unknown)';
  return buildCast({
    actionId: state.action_id,
    hostName,
    execAtMs: undefined,
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    marks: [],
    redacted: { stdout: false, stderr: false },
    truncated: false,
    receivedBytes: 0,
  });
}

/**
 * Seals the recordings an earlier run left open for commands it never sent (the broker stopped, crashed, or its store
 * failed between the open row and the seal), as the executor would have: empty, with the never-sent mark. Run at start,
 * before any action can run, so no open row belongs to a live action. A dispatched action's open recording is left
 * open: output may have been lost, and RECORDING_INCOMPLETE says so. Resolves with how many were sealed.
 */
export async function closeUnsentRecordings(deps: {
  readonly recordings: Pick<RecordingStore, 'openActionIds' | 'finish'>;
  readonly journal: Pick<Journal, 'getAction'>;
  readonly clock: Clock;
  readonly logger?: Logger;
}): Promise<number> {
  let sealed = 0;
  let after = '';
  for (;;) {
    const ids = deps.recordings.openActionIds(after, unsentRecordingsBatchMax);
    for (const actionId of ids) {
      const cast = unsentCast(deps.journal.getAction(actionId));
      if (cast === undefined) continue;
      // In turn, as before: the first that cannot be written ends the pass (the caller logs it).
      await deps.recordings.finish(recordingIdOf(actionId), cast, false, deps.clock.nowMs());
      sealed += 1;
    }
    if (ids.length < unsentRecordingsBatchMax) break;
    after = ids.at(-1) ?? after;
  }
  if (sealed > 0)
    deps.logger?.info({ sealed }, 'ssh recordings of commands never sent, left open by an earlier run, sealed');
  return sealed;
}
