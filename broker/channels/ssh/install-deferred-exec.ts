import type { Client } from 'ssh2';

/**
 * THE ONE SEAM into ssh2 internals (ssh2 1.17, lib/client.js). `client.exec` opens a session channel
 * and, from the CHANNEL_OPEN_CONFIRMATION handler, immediately writes the exec request through
 * `client._protocol.exec(channelId, cmd, wantReply)` (function reqExec). ssh2 has no public API to
 * open a session channel without a request, and the dispatch boundary must sit exactly between the
 * two: after the channel is open (every setup stage done) and before the exec request's bytes.
 *
 * So, on this one client, `_protocol.exec` is replaced by a function that does not write: it
 * reports "session channel open" and hands back `send()`, which performs the original write once.
 * reqExec has already queued its reply callback when it calls `_protocol.exec`, so deferring the
 * write keeps ssh2's reply bookkeeping intact (CHANNEL_SUCCESS/FAILURE still resolve exec's cb).
 *
 * ssh2 fails exec's callback with the same Error('Unable to exec') for a real SSH_MSG_CHANNEL_FAILURE and for a
 * CHANNEL_CLOSE (or a dropped connection) that arrives before any reply (utils.js onCHANNEL_CLOSE runs the pending
 * channel callbacks with `true`). Only the first is the server's refusal; after the others the command may have run.
 * So `_protocol._handlers.CHANNEL_FAILURE` is wrapped too: while ssh2's own handler runs for a CHANNEL_FAILURE that
 * arrived after `send()`, `answeringChannelFailure()` is true. That handler calls exec's callback synchronously, and
 * only for the channel the message names, so an exec-callback error seen while it is true is that refusal. A
 * CHANNEL_FAILURE that arrives before `send()` answers nothing of ours: `unsolicitedChannelFailure()` is true while
 * ssh2's handler runs for one (a rogue server; ssh2 still hands it the exec callback it has queued).
 *
 * `isOpen()` turns true synchronously, inside ssh2's CHANNEL_OPEN_CONFIRMATION handler: a reply or a CHANNEL_CLOSE that
 * the server packed into the same TCP read as the confirmation runs the exec callback before any promise reaction,
 * and it must still be read as coming after the open, never as the open refused.
 *
 * If ssh2 changes shape (no `_protocol.exec` or no `_protocol._handlers.CHANNEL_FAILURE` function),
 * `installDeferredExec` throws and the channel fails closed before dispatch. Should ssh2 ever defer exec's callback
 * out of that handler, a refusal would read as unknown, never the other way round. Tests run this against real
 * OpenSSH and a misbehaving server.
 */
export interface DeferredExec {
  /** Resolves when the session channel is open and the exec request is waiting to be written. */
  readonly channelOpen: Promise<{ send: () => void }>;
  /** True only while ssh2 handles an SSH_MSG_CHANNEL_FAILURE received after `send()` (see above). */
  readonly answeringChannelFailure: () => boolean;
  /** True only while ssh2 handles an SSH_MSG_CHANNEL_FAILURE received before `send()`: no request of ours asked it. */
  readonly unsolicitedChannelFailure: () => boolean;
  /** The session channel was confirmed open (set synchronously, in ssh2's handler). */
  readonly isOpen: () => boolean;
}

type MessageHandler = (protocol: unknown, recipient: number) => void;

interface ProtocolLike {
  exec(channelId: number, command: string, wantReply: boolean): void;
  _handlers?: { CHANNEL_FAILURE?: MessageHandler };
}

export function installDeferredExec(client: Client): DeferredExec {
  const protocol = (client as unknown as { _protocol?: ProtocolLike })._protocol;
  if (protocol === undefined || typeof protocol.exec !== 'function')
    throw new Error('ssh2 internals changed: no _protocol.exec');
  const handlers = protocol._handlers;
  const onChannelFailure = handlers?.CHANNEL_FAILURE;
  if (handlers === undefined || typeof onChannelFailure !== 'function')
    throw new Error('ssh2 internals changed: no _protocol._handlers.CHANNEL_FAILURE');
  const original = protocol.exec.bind(protocol);
  let resolveOpen: (value: { send: () => void }) => void = () => undefined;
  const channelOpen = new Promise<{ send: () => void }>((resolve) => {
    resolveOpen = resolve;
  });
  let used = false;
  let sent = false;
  let answering = false;
  let unsolicited = false;
  protocol.exec = (channelId, command, wantReply) => {
    if (used) throw new Error('deferred exec: one exec per connection');
    used = true;
    resolveOpen({
      send: () => {
        if (sent) return;
        sent = true;
        original(channelId, command, wantReply);
      },
    });
  };
  handlers.CHANNEL_FAILURE = (self, recipient) => {
    // Before send() no exec request is out, so no CHANNEL_FAILURE can answer it.
    answering = sent;
    unsolicited = !sent;
    try {
      onChannelFailure(self, recipient);
    } finally {
      answering = false;
      unsolicited = false;
    }
  };
  return {
    channelOpen,
    answeringChannelFailure: () => answering,
    unsolicitedChannelFailure: () => unsolicited,
    isOpen: () => used,
  };
}
