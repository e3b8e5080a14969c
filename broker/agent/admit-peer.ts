import type { ErrorCode } from '../contract/index.js';

export type PeerDecision =
  { admit: true } | { admit: false; code: Extract<ErrorCode, 'PEER_REFUSED'>; message: string };

/**
 * Whether an identified peer may use the socket. Only the broker's own user may: the socket's 0600
 * mode already keeps others out, except root, which file modes do not stop — so root connecting to
 * a user's broker is refused here (and a root broker serves only root). Whether it fits under the
 * connection cap is make-room.ts's decision. Pure, so every branch is tested without a second user account.
 */
export function admitPeer(input: { peerUid: number; ownUid: number }): PeerDecision {
  if (input.ownUid < 0 || input.peerUid !== input.ownUid) {
    return { admit: false, code: 'PEER_REFUSED', message: 'this broker serves only processes of the user it runs as' };
  }
  return { admit: true };
}
