import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { CodedError } from '../contract/coded-error.js';

/** What the kernel says about the process at the other end of a Unix socket. */
export interface PeerCredentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

type PeerCredentialsFn = (fd: number) => PeerCredentials;

let loaded: { fn: PeerCredentialsFn } | { error: string } | undefined;

/**
 * The addon is loaded on first use, not at import: a broker whose addon failed to build still
 * starts (the operator UI works) and refuses every agent connection with PEER_REFUSED, because
 * an agent we cannot identify is never admitted.
 */
function addon(): PeerCredentialsFn {
  if (loaded === undefined) {
    try {
      const module = createRequire(import.meta.url)('postern-peercred') as { peerCredentials?: unknown };
      loaded =
        typeof module.peerCredentials === 'function'
          ? { fn: module.peerCredentials as PeerCredentialsFn }
          : { error: 'the addon has no peerCredentials export' };
    } catch (error) {
      loaded = { error: error instanceof Error ? error.message : String(error) };
    }
  }
  if ('error' in loaded)
    throw new CodedError(
      'PEER_REFUSED',
      `the peer credential addon (postern-peercred) is not available: ${loaded.error}`,
    );
  return loaded.fn;
}

/**
 * The file descriptor of an accepted Unix socket. Node keeps it on the internal `_handle` (a
 * libuv pipe_wrap); there is no public API. Fail closed: anything but a non-negative integer means
 * we cannot ask the kernel, so the peer is refused.
 */
export function socketFd(socket: Socket): number {
  const handle = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle;
  const fd = handle?.fd;
  if (typeof fd !== 'number' || !Number.isInteger(fd) || fd < 0) {
    throw new CodedError('PEER_REFUSED', 'the connection has no readable file descriptor');
  }
  return fd;
}

/** Credentials of the peer of `socket`, straight from the kernel. Throws CodedError PEER_REFUSED. */
export function readPeerCredentials(socket: Socket): PeerCredentials {
  const fn = addon();
  let credentials: PeerCredentials;
  try {
    credentials = fn(socketFd(socket));
  } catch (error) {
    if (error instanceof CodedError) throw error;
    const code = (error as { code?: unknown }).code;
    throw new CodedError(
      'PEER_REFUSED',
      `the kernel did not give the peer's credentials (${typeof code === 'string' ? code : 'unknown error'})`,
      { cause: error },
    );
  }
  for (const key of ['pid', 'uid', 'gid'] as const) {
    const value = credentials[key];
    if (!Number.isSafeInteger(value) || value < 0)
      throw new CodedError('PEER_REFUSED', `the kernel gave an unusable peer ${key}`);
  }
  return { pid: credentials.pid, uid: credentials.uid, gid: credentials.gid };
}
