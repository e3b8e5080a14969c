import type { BrokerApiMethod } from '../../broker/contract/index.js';

/** The IPC channel for one operator API method; main registers exactly these, preload invokes them. */
export function apiChannel(method: BrokerApiMethod): `postern:api:${BrokerApiMethod}` {
  return `postern:api:${method}`;
}

/** The one channel main sends on: the broker's change notices (position and topics, no data) to our window's top frame. */
export const changeChannel = 'postern:changes';
