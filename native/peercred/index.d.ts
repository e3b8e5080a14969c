/** The connecting process as the kernel recorded it when it called connect(). */
export interface PeerCredentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

/**
 * Reads the peer credentials of a connected Unix domain socket: SO_PEERCRED on Linux,
 * getpeereid + LOCAL_PEERPID on macOS. Throws an Error whose `code` is PEERCRED_BAD_ARGUMENT,
 * PEERCRED_SYSCALL_FAILED, PEERCRED_NO_PEER, PEERCRED_UNSUPPORTED (other platforms) or
 * PEERCRED_INTERNAL.
 */
export function peerCredentials(fd: number): PeerCredentials;
