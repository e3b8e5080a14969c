/**
 * Every wait of the SSH channel has its own deadline (a silent server must never hang the broker),
 * and every buffer a cap. Named constants, units last; tests and the bench may narrow them.
 */
export interface SshLimits {
  /** DNS lookup of the host entry's name. */
  readonly dnsTimeoutMs: number;
  /** TCP connect. */
  readonly connectTimeoutMs: number;
  /** Banner, key exchange and host key check (until the verifier has answered). */
  readonly handshakeTimeoutMs: number;
  /** User authentication, from the accepted host key to `ready`. */
  readonly authTimeoutMs: number;
  /** Session channel open (CHANNEL_OPEN → confirmation or failure). */
  readonly channelOpenTimeoutMs: number;
  /** Exec request (want-reply) → CHANNEL_SUCCESS / CHANNEL_FAILURE. */
  readonly execReplyTimeoutMs: number;
  /** After exit status/signal: how long to wait for EOF/close before calling the output incomplete. */
  readonly closeAfterExitTimeoutMs: number;
  /** Command bytes (UTF-8) the agent may send. */
  readonly commandBytesMax: number;
}

export const defaultSshLimits: SshLimits = {
  dnsTimeoutMs: 5_000,
  connectTimeoutMs: 10_000,
  handshakeTimeoutMs: 10_000,
  authTimeoutMs: 10_000,
  channelOpenTimeoutMs: 10_000,
  execReplyTimeoutMs: 10_000,
  closeAfterExitTimeoutMs: 2_000,
  commandBytesMax: 32 * 1024,
};
