import type { JournalEvent, NewEvent } from '../contract/index.js';

/**
 * What a channel may do with the journal: record observations, and cross the dispatch boundary.
 * Implemented by broker/journal's Journal; channels depend on this port, never on the journal.
 */
export interface DispatchGate {
  /**
   * Records DISPATCH_STARTED for `attempt` and resolves only when it is durable. The channel hands
   * the first application byte to the transport only after this resolves; if it rejects, nothing
   * may be sent.
   */
  beginDispatch(
    actionId: string,
    attempt: number,
    connection: {
      connection: 'fresh' | 'reused';
      connection_id?: string;
      /** The verified peer (TLS certificate SHA-256, SSH host key fingerprint), made durable with the boundary. */
      peer_identity?: string;
      peer_trust?: 'pinned' | 'ca_verified' | 'known_host' | 'accepted_new';
      /** The retry lease this attempt runs under; the journal refuses a stale one (LEASE_LOST). */
      generation?: number;
    },
  ): Promise<{ event: JournalEvent }>;
  /** Appends an observation or settlement; resolves when durable. */
  append(event: NewEvent): Promise<{ event: JournalEvent }>;
  /**
   * An observation that rides in the next commit instead of starting one (Journal.appendLater); resolves with that
   * commit. A gate without it is sent append.
   */
  appendLater?(event: NewEvent): Promise<{ event: JournalEvent }>;
  /** What appendLater holds is committed on the next turn: the caller is about to await it. */
  commitHeld?(): void;
}

/**
 * A channel's observation appends handed to the caller unsettled (HttpWireRequest.observationsRideWithSettlement): they
 * ride in the commit of the settlement the caller appends next with AppendOptions.withHeld.
 */
export interface HeldObservations {
  /** The first failure among the appends already settled (synchronous: read it right before queueing the settlement). */
  failure(): unknown;
  /** Commits what is still held and resolves (never rejects) once every append settled: the first failure, or undefined. */
  settled(): Promise<unknown>;
}
