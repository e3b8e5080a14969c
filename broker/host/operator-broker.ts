import type { BrokerStatus } from '../contract/index.js';

/**
 * What the operator surfaces (HTTP host, Electron IPC) need from the broker. Kept this small on
 * purpose: the host depends on this seam, never on the journal or the queue directly, so either can
 * change without touching the transport code.
 */
export interface OperatorBroker {
  status(): BrokerStatus;
}
