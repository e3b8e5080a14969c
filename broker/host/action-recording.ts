import type { BrokerApi, OperatorInput } from '../contract/index.js';
import { CodedError } from '../contract/index.js';
import type { ResultStore } from '../journal/index.js';

/**
 * `actions.recording`: an SSH action's sealed session recording, opened (an earlier run's needs the unlocked vault,
 * like its result). The cast holds only the scrubbed output the agent itself received, so reading it is a read.
 */
export function readActionRecording(
  results: Pick<ResultStore, 'recordings'>,
  input: OperatorInput<'actions.recording'>,
): BrokerApi['actions.recording']['output'] {
  if (!input.action_id.startsWith('act_'))
    throw new CodedError('NOT_FOUND', `no action ${input.action_id}`, { field: 'action_id' });
  const recording = results.recordings.read(input.action_id);
  return { cast: recording.cast.toString('utf8'), truncated: recording.truncated, bytes: recording.cast.length };
}
