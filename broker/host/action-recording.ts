import type { ActionState, BrokerApi, OperatorInput } from '../contract/index.js';
import { CodedError, isCodedError, unknownWaysOut } from '../contract/index.js';
import type { Journal, ResultStore } from '../journal/index.js';
import { unsentCast } from '../actions/index.js';

/**
 * `actions.recording`: an SSH action's sealed session recording, opened (an earlier run's needs the unlocked vault,
 * like its result). The cast holds only the scrubbed output the agent itself received, so reading it is a read.
 * A recording whose command is still in flight in this run (being set up or running: its store started it and has
 * not finished it) answers RECORDING_IN_PROGRESS — nothing is lost yet, it is sealed when the command ends. A recording
 * left open for a command the journal proves was never sent (the broker stopped or its store failed before the seal;
 * the next start seals it) reads as the sealed one would — the never-sent mark — never as RECORDING_INCOMPLETE, which
 * would claim output was lost.
 */
export function readActionRecording(
  results: Pick<ResultStore, 'recordings'>,
  journal: Pick<Journal, 'getAction'>,
  input: OperatorInput<'actions.recording'>,
): BrokerApi['actions.recording']['output'] {
  if (!input.action_id.startsWith('act_'))
    throw new CodedError('NOT_FOUND', `no action ${input.action_id}`, { field: 'action_id' });
  try {
    const recording = results.recordings.read(input.action_id);
    return { cast: recording.cast.toString('utf8'), truncated: recording.truncated, bytes: recording.cast.length };
  } catch (error) {
    if (!isCodedError(error) || error.code !== 'RECORDING_INCOMPLETE') throw error;
    const state = journal.getAction(input.action_id);
    const cast = unsentCast(state);
    if (cast === undefined) throw state === undefined ? error : incompleteFor(state, error);
    return { cast: cast.toString('utf8'), truncated: false, bytes: cast.length };
  }
}

/**
 * RECORDING_INCOMPLETE naming what ran, as far as the record can: the host and the command's digest (the journal
 * never holds the command itself: it may hold anything), the ticket and where it was accepted in the journal, and for
 * an unknown outcome what a person can do about it. A position, not a wall time: the message reaches the terminal
 * (ISO UTC) and the console's recording player (local time, zone named) alike, and the daemon cannot write one time
 * both ways; the Action detail's chronology beside the player gives each seq its time in the viewer's zone.
 */
function incompleteFor(state: ActionState, cause: CodedError): CodedError {
  const what =
    `ticket #${state.ticket ?? '-'} ${state.target} (only the command's digest is journaled, never the command), ` +
    `accepted at seq ${state.first_seq}`;
  const unknown =
    state.recorded && state.outcome === 'unknown' ? `; its outcome is unknown: ${unknownWaysOut(state)}` : '';
  return new CodedError(
    'RECORDING_INCOMPLETE',
    `${cause.message}: what the command printed may be lost; it was ${what}${unknown}`,
    {
      field: 'action_id',
      cause,
    },
  );
}
