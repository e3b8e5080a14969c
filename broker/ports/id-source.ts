/**
 * Action ids enter the broker only through this port, so decisions stay pure and tests can make
 * ids predictable.
 */
export interface IdSource {
  /** A new invocation id: `act_` followed by 26 Crockford base32 characters. */
  newActionId(): string;
}
