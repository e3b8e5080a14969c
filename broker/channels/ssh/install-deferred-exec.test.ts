import type { Client } from 'ssh2';
import { describe, expect, it } from 'vitest';
import { installDeferredExec } from './install-deferred-exec.js';

/**
 * The seam's shape checks, on stand-ins for ssh2 1.17's `_protocol` (a real ssh2 client always has the shape; what it
 * does against real servers is in ssh-channel.test.ts and execute-ssh-action-misbehaving.test.ts).
 */
function fakeClient(protocol: object | undefined): Client {
  return { _protocol: protocol } as unknown as Client;
}

describe('when ssh2 no longer has the shape the seam needs, it fails closed (throws before anything is sent)', () => {
  const nothing = (): void => undefined;
  it.for<[string, object | undefined]>([
    ['no _protocol', undefined],
    ['no _protocol.exec', { _handlers: { CHANNEL_FAILURE: nothing } }],
    ['no _protocol._handlers', { exec: nothing }],
    ['no CHANNEL_FAILURE handler', { exec: nothing, _handlers: {} }],
  ])('%s', ([, protocol]) => {
    expect(() => installDeferredExec(fakeClient(protocol))).toThrow(/ssh2 internals changed/);
  });
});

describe('when a CHANNEL_FAILURE arrives', () => {
  it("is answering one only inside ssh2's own handler, and only after send()", async () => {
    const written: string[] = [];
    const seenInHandler: boolean[] = [];
    const protocol = {
      exec: (_id: number, command: string, _wantReply: boolean): void => {
        written.push(command);
      },
      _handlers: {
        CHANNEL_FAILURE: (_p: unknown, _recipient: number): void => {
          seenInHandler.push(deferred.answeringChannelFailure());
        },
      },
    };
    const deferred = installDeferredExec(fakeClient(protocol));
    protocol.exec(0, 'deploy', true);
    const { send } = await deferred.channelOpen;
    protocol._handlers.CHANNEL_FAILURE(protocol, 0);
    send();
    expect(written).toEqual(['deploy']);
    protocol._handlers.CHANNEL_FAILURE(protocol, 0);
    expect(seenInHandler).toEqual([false, true]);
    expect(deferred.answeringChannelFailure()).toBe(false);
  });

  it('is unsolicited only inside ssh2’s own handler, and only before send(); the open is seen at once', async () => {
    const seenInHandler: boolean[] = [];
    const protocol = {
      exec: (): void => undefined,
      _handlers: {
        CHANNEL_FAILURE: (_p: unknown, _recipient: number): void => {
          seenInHandler.push(deferred.unsolicitedChannelFailure());
        },
      },
    };
    const deferred = installDeferredExec(fakeClient(protocol));
    expect(deferred.isOpen()).toBe(false);
    protocol.exec();
    // Synchronously, before any promise reaction: a message in the same read as the confirmation sees it open.
    expect(deferred.isOpen()).toBe(true);
    const { send } = await deferred.channelOpen;
    protocol._handlers.CHANNEL_FAILURE(protocol, 0);
    send();
    protocol._handlers.CHANNEL_FAILURE(protocol, 0);
    expect(seenInHandler).toEqual([true, false]);
    expect(deferred.unsolicitedChannelFailure()).toBe(false);
  });
});
