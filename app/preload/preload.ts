import { contextBridge, ipcRenderer } from 'electron';
import type { BrokerApi, BrokerApiMethod, Reply } from '../../broker/contract/index.js';
import { apiChannel } from '../shared/api-channel.js';

/**
 * The only bridge between the sandboxed renderer and the main process. It exposes exactly the
 * operator API methods, each forwarding to its own channel; typed from the contract's BrokerApi
 * map, so a method missing here fails to compile. Nothing else of Electron (no ipcRenderer, no
 * send/on) reaches the page. Bundled to dist/app/preload.cjs by scripts/build-app.mjs: a sandboxed
 * preload may require only 'electron'.
 */
type OperatorBridge = {
  [M in BrokerApiMethod]: (input: BrokerApi[M]['input']) => Promise<Reply<BrokerApi[M]['output']>>;
};

const bridge: OperatorBridge = {
  status: (input) => ipcRenderer.invoke(apiChannel('status'), input) as Promise<Reply<BrokerApi['status']['output']>>,
};

contextBridge.exposeInMainWorld('postern', bridge);
