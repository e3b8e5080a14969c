import type { Channel } from '../contract/index.js';
import type { StoredResult } from '../journal/index.js';
import type { ActionAnswerParts } from './agent-answers.js';

/**
 * A stored result as the agent receives it again (fetch_result): HTTP status, headers and body; or
 * SSH stdout and stderr split by the stored counts. Built from the result store only: a read.
 */
export function storedAnswerParts(channel: Channel, stored: StoredResult): Pick<ActionAnswerParts, 'response' | 'output'> {
  const s = stored.summary;
  if (channel === 'http') {
    return {
      response: {
        status: num(s['status']) ?? 0,
        headers: strings(s['headers']),
        body: stored.body,
        truncated: stored.truncated,
        total_bytes: stored.total_bytes,
        redacted: s['redacted'] === true,
      },
    };
  }
  const stdoutStored = num(s['stdout_stored_bytes']) ?? stored.body.length;
  const exitStatus = num(s['exit_status']);
  const exitSignal = typeof s['exit_signal'] === 'string' ? s['exit_signal'] : undefined;
  return {
    output: {
      ...(exitStatus === undefined ? {} : { exit_status: exitStatus }),
      ...(exitSignal === undefined ? {} : { exit_signal: exitSignal }),
      stdout: stored.body.subarray(0, stdoutStored),
      stderr: stored.body.subarray(stdoutStored),
      stdout_bytes: num(s['stdout_bytes']) ?? stdoutStored,
      stderr_bytes: num(s['stderr_bytes']) ?? stored.body.length - stdoutStored,
      truncated: stored.truncated,
      output_complete: s['output_complete'] !== false,
    },
  };
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
}

function strings(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}
