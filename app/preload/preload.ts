import { contextBridge, ipcRenderer } from 'electron';
import type { BrokerApi, BrokerApiMethod, Reply } from '../../broker/contract/index.js';
import { brokerApiMethods } from '../../broker/contract/operator-methods.js';
import { apiChannel } from '../shared/api-channel.js';

/**
 * The only bridge between the sandboxed renderer and the main process. It exposes exactly the
 * operator API methods (the contract's method list), each forwarding to its own channel; main
 * validates every input against the method's schema. Nothing else of Electron (no ipcRenderer, no
 * send/on) reaches the page. Bundled to dist/app/preload.cjs by scripts/build-app.mjs: a sandboxed
 * preload may require only 'electron' (operator-methods.ts has no imports).
 */
type OperatorBridge = {
  [M in BrokerApiMethod]: (input: BrokerApi[M]['input']) => Promise<Reply<BrokerApi[M]['output']>>;
};

const bridge = Object.fromEntries(
  brokerApiMethods.map((method) => [method, (input: unknown) => ipcRenderer.invoke(apiChannel(method), input) as Promise<Reply<unknown>>]),
) as OperatorBridge;

contextBridge.exposeInMainWorld('postern', bridge);
