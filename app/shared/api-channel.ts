import type { BrokerApiMethod } from '../../broker/contract/index.js';

/** The IPC channel for one operator API method; main registers exactly these, preload invokes them. */
export function apiChannel(method: BrokerApiMethod): `postern:api:${BrokerApiMethod}` {
  return `postern:api:${method}`;
}
