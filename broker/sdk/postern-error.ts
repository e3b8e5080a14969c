import type { AgentRefusal, AgentToolReply, RetryDisposition } from '../contract/index.js';

/**
 * A tool answer flagged isError: the broker's full envelope (an action that failed, was refused or
 * whose outcome is unknown) or a refusal that belongs to no action. Branch on `code` and `retry`,
 * never on the message.
 */
export class PosternActionError extends Error {
  readonly envelope: AgentToolReply;
  readonly code: string;
  readonly retry: RetryDisposition | undefined;
  /** The action this error belongs to, or null for a refusal before any action existed. */
  readonly invocationId: string | null;

  constructor(envelope: AgentToolReply) {
    const error = envelope.error;
    super(error === undefined ? 'the broker flagged the answer as an error' : `${error.code}: ${error.message}`);
    this.name = 'PosternActionError';
    this.envelope = envelope;
    this.code = error?.code ?? 'INTERNAL';
    this.retry = error?.retry;
    this.invocationId = envelope.invocation_id;
  }

  /** True when no action was created (a refusal of the call itself). */
  isRefusal(): this is PosternActionError & { envelope: AgentRefusal } {
    return this.envelope.invocation_id === null;
  }
}

/**
 * The broker could not be reached, refused the connection, answered something that is not Postern's protocol, or
 * went away before it answered (CONNECTION_LOST): then `actionId` names the action the call recorded, when the
 * broker had named one — ask action_status about it once a broker is back instead of sending the call again.
 */
export class PosternConnectionError extends Error {
  readonly code: string;
  readonly actionId: string | undefined;

  constructor(code: string, message: string, options?: { cause?: unknown; actionId?: string }) {
    super(message, options);
    this.name = 'PosternConnectionError';
    this.code = code;
    this.actionId = options?.actionId;
  }
}
