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

/** This process after hardening, read back from the kernel. */
export interface ProcessHardening {
  /** Linux: PR_GET_DUMPABLE != 0. macOS: false once PT_DENY_ATTACH succeeded (no read-back exists). */
  readonly dumpable: boolean;
  /** The soft RLIMIT_CORE in bytes (Infinity when unlimited). */
  readonly coreLimit: number;
}

/**
 * Makes this process unreadable by other processes of the same user and stops core dumps:
 * prctl(PR_SET_DUMPABLE, 0) on Linux, ptrace(PT_DENY_ATTACH) on macOS, and RLIMIT_CORE 0 (soft
 * and hard) on both. Throws an Error whose `code` is PEERCRED_SYSCALL_FAILED, PEERCRED_UNSUPPORTED
 * (other platforms) or PEERCRED_INTERNAL.
 */
export function hardenProcess(): ProcessHardening;

/**
 * Takes the exclusive advisory lock on an open file without waiting: flock(fd, LOCK_EX | LOCK_NB)
 * on Linux and macOS. true: this open file holds it until it is closed or the process dies (the
 * kernel releases it then, however the process ended); false: another open file holds it (a
 * stopped process still does). Throws an Error whose `code` is PEERCRED_BAD_ARGUMENT,
 * PEERCRED_SYSCALL_FAILED (with `errno`) or PEERCRED_UNSUPPORTED (other platforms).
 */
export function lockFile(fd: number): boolean;

/**
 * The socket inodes of every TCP socket in LISTEN state (IPv4 and IPv6) of the CALLER's network namespace, from one
 * NETLINK_SOCK_DIAG dump per family (inet_diag_req_v2, idiag_states = 1 << TCP_LISTEN: the kernel walks only its
 * listening hash). Linux only. Throws an Error whose `code` is PEERCRED_SYSCALL_FAILED (with `errno`; EPROTO for an
 * answer that does not parse), PEERCRED_UNSUPPORTED (other platforms) or PEERCRED_INTERNAL.
 */
export function listeningTcpInodes(): number[];
