import { contextBridge, ipcRenderer } from 'electron';
import type { BrokerApi, BrokerApiMethod, Reply } from '../../broker/contract/index.js';
import { brokerApiMethods } from '../../broker/contract/operator-methods.js';
import { apiChannel, changeChannel } from '../shared/api-channel.js';

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
  brokerApiMethods.map((method) => [
    method,
    (input: unknown) => ipcRenderer.invoke(apiChannel(method), input) as Promise<Reply<unknown>>,
  ]),
) as OperatorBridge;

contextBridge.exposeInMainWorld('postern', bridge);

/**
 * The broker's change notices, which main sends to this window's top frame only. The page gets a
 * subscribe function, never ipcRenderer: it can listen to this one channel and nothing else, and
 * hears a notice rebuilt from its two fields.
 */
const changes = {
  subscribe(listener: (notice: { seq: number; topics: string[] }) => void): () => void {
    const forward = (_event: unknown, notice: { seq?: unknown; topics?: unknown }): void => {
      if (typeof notice?.seq !== 'number' || !Array.isArray(notice.topics)) return;
      listener({
        seq: notice.seq,
        topics: notice.topics.filter((topic): topic is string => typeof topic === 'string'),
      });
    };
    ipcRenderer.on(changeChannel, forward);
    return () => void ipcRenderer.removeListener(changeChannel, forward);
  },
};

contextBridge.exposeInMainWorld('posternChanges', changes);
