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
 * If ssh2 changes shape, `installDeferredExec` throws (no `_protocol.exec` function) and the channel
 * fails closed before dispatch; tests run this against real OpenSSH and a misbehaving server.
 */
export interface DeferredExec {
  /** Resolves when the session channel is open and the exec request is waiting to be written. */
  readonly channelOpen: Promise<{ send: () => void }>;
}

interface ProtocolLike {
  exec(channelId: number, command: string, wantReply: boolean): void;
}

export function installDeferredExec(client: Client): DeferredExec {
  const protocol = (client as unknown as { _protocol?: ProtocolLike })._protocol;
  if (protocol === undefined || typeof protocol.exec !== 'function')
    throw new Error('ssh2 internals changed: no _protocol.exec');
  const original = protocol.exec.bind(protocol);
  let resolveOpen: (value: { send: () => void }) => void = () => undefined;
  const channelOpen = new Promise<{ send: () => void }>((resolve) => {
    resolveOpen = resolve;
  });
  let used = false;
  protocol.exec = (channelId, command, wantReply) => {
    if (used) throw new Error('deferred exec: one exec per connection');
    used = true;
    let sent = false;
    resolveOpen({
      send: () => {
        if (sent) return;
        sent = true;
        original(channelId, command, wantReply);
      },
    });
  };
  return { channelOpen };
}
